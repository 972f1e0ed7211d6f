package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The path rules of a policy, compiled into Landlock rules.
//
// Landlock only grants: a right given on a directory holds for everything
// beneath it, and nothing beneath can take it back. So the workspace is
// walked and rights are granted around what the policy refuses:
//
//   - a directory with nothing refused beneath it (itself included) gets one
//     rule: every right (read-write), or read alone when something beneath
//     may not be written;
//   - a directory with something unreadable beneath it ("split") gets only
//     READ_DIR (its names can be listed, and so can those of every directory
//     beneath it, forbidden ones included: READ_DIR cascades), and its
//     entries get rules of their own. It gets no right to create, remove,
//     rename, link or truncate anything: each would cascade to the refused
//     entries (replacing or deleting a forbidden or protected file, creating
//     a hook in a protected directory);
//   - a file gets read (and write and truncate unless refused for writing);
//     a refused file gets nothing, nor does any other name of its inode (a
//     hard link), since Landlock's rules attach to inodes;
//   - symbolic links get no rule: a program that follows one reaches
//     whatever its target's own rules grant, never more.
//
// Programs cannot execute files in the workspace unless WorkspaceExec is
// set; they can in the call's private directory (go test runs its test
// binaries from there).

// PathPolicy answers, for the workspace and the system paths, which files
// the programs a call starts may not read or write. Its answers must depend
// only on the path and the file system for a given Key.
type PathPolicy interface {
	// Key identifies the answers; "" means they may not be cached.
	Key() string
	// RefusesRead reports whether path may not be read. path is real:
	// absolute, clean, and no component of it was a symbolic link when
	// the workspace was walked (opened without following any).
	RefusesRead(path string) bool
	// RefusesWrite reports whether path (real, as for RefusesRead) may not
	// be written, created, removed or renamed.
	RefusesWrite(path string) bool
	// RefusesSystem reports whether programs may not read the system path
	// (absolute, outside the workspace) that they need to run.
	RefusesSystem(path string) bool
	// Err is non-nil once the answers can no longer be trusted (the call
	// ended while they were asked): nothing computed from them is kept.
	Err() error
}

// Confinement is what the programs of one start may reach besides the
// system directories.
type Confinement struct {
	// Workspace is the real path of the workspace; empty for none.
	Workspace string
	// Policy decides which of the workspace's files and of the system
	// paths are reachable; nil grants the whole workspace read-write.
	Policy PathPolicy
	// Writable are further directories granted every right, execution
	// included (the call's private directory); they are not walked.
	Writable []string
}

// probeName is the name asked about, in every directory of the workspace,
// to learn whether the policy lets programs create new files there.
const probeName = ".toolhooks-new-file"

// Rights of the rules.
const (
	makeRights = llsys.AccessFSMakeChar | llsys.AccessFSMakeDir | llsys.AccessFSMakeReg | llsys.AccessFSMakeSock |
		llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym
	readRights  = llsys.AccessFSReadFile | llsys.AccessFSReadDir
	writeRights = llsys.AccessFSWriteFile | llsys.AccessFSTruncate
)

// rule is one Landlock rule: an O_PATH descriptor and its rights.
type rule struct {
	fd     int
	rights uint64
}

// node is one directory or file of the workspace as last walked.
type node struct {
	rel  string // slash-separated, relative to the root; "" for the root
	ino  uint64
	dir  bool
	kids []*node

	r, w       bool  // refused for reading, for writing
	create     bool  // (directories) creating a new file in it is refused
	unreadable bool  // r somewhere in the subtree, itself included
	unwritable bool  // w or create somewhere in the subtree
	cover      uint8 // (directories) what the rules grant beneath it: coverNone, coverRead or coverAll
}

// What the rules grant everything beneath a directory.
const (
	coverNone = iota // nothing: its entries have rules of their own
	coverRead        // reading; its entries' rules add writing
	coverAll         // every right
)

// compiled is the rules of one policy for one workspace, with the inotify
// watches that tell when the tree changed in a way that may make them wrong.
type compiled struct {
	mu      sync.Mutex
	key     string
	root    string
	valid   bool
	rules   []rule // the workspace's
	sys     []rule // the system paths' (systemRules only)
	inotify int    // -1 when not watching: the rules are computed for every start
	dirs    map[int32]*node
	used    uint64
}

// close releases every descriptor.
func (c *compiled) close() {
	c.closeRules()
	for _, r := range c.sys {
		_ = unix.Close(r.fd)
	}
	c.sys = nil
}

func (c *compiled) closeRules() {
	for _, r := range c.rules {
		_ = unix.Close(r.fd)
	}
	c.rules, c.dirs, c.valid = nil, nil, false
	if c.inotify >= 0 {
		// Closing an instance with many watches waits for the kernel to
		// release them: off the call's path.
		go func(fd int) { _ = unix.Close(fd) }(c.inotify)
	}
	c.inotify = -1
}

// ruleCache keeps the compiled rules of the last few policies and workspaces.
type ruleCache struct {
	walks atomic.Int64 // how many times a workspace was walked

	mu      sync.Mutex
	entries map[string]*compiled
	tick    uint64
}

// maxCached bounds the policies and workspaces whose rules are kept.
const maxCached = 16

// get returns the entry of key, locked, creating it (and evicting the least
// recently used) when needed.
func (rc *ruleCache) get(key, root string) *compiled {
	k := key + "\x00" + root
	rc.mu.Lock()
	rc.tick++
	c, ok := rc.entries[k]
	if !ok {
		if rc.entries == nil {
			rc.entries = map[string]*compiled{}
		}
		if len(rc.entries) >= maxCached {
			var old string
			var oldest *compiled
			for ek, e := range rc.entries {
				if oldest == nil || e.used < oldest.used {
					old, oldest = ek, e
				}
			}
			delete(rc.entries, old)
			go func() { oldest.mu.Lock(); oldest.close(); oldest.mu.Unlock() }()
		}
		c = &compiled{key: key, root: root, inotify: -1}
		rc.entries[k] = c
	}
	c.used = rc.tick
	rc.mu.Unlock()
	c.mu.Lock()
	return c
}

// pathRules adds to ruleset the rules of c's workspace and system paths.
func (s *Sandbox) pathRules(ruleset int, c Confinement, handled uint64) error {
	if c.Workspace == "" {
		return s.systemRules(ruleset, nil, handled)
	}
	if c.Policy == nil {
		if err := addRule(ruleset, c.Workspace, s.workspaceRights(handled), handled, true); err != nil {
			return err
		}
		return s.systemRules(ruleset, nil, handled)
	}
	key := c.Policy.Key()
	var cc *compiled
	if key == "" {
		cc = &compiled{root: c.Workspace, inotify: -1}
		defer cc.close()
	} else {
		cc = s.cache.get(key, c.Workspace)
		defer cc.mu.Unlock()
	}
	if cc.valid && (!s.stillValid(cc, c.Policy) || c.Policy.Err() != nil) {
		cc.closeRules()
	}
	if !cc.valid {
		if err := s.compile(cc, c.Policy, handled); err != nil {
			cc.closeRules()
			return err
		}
		if c.Policy.Err() != nil || key == "" || cc.inotify < 0 {
			defer cc.closeRules() // used for this start alone
		}
	}
	for _, r := range cc.rules {
		if err := addFDRule(ruleset, r.fd, r.rights&handled); err != nil {
			return err
		}
	}
	// The system paths are opened for every start: a file replaced there
	// (a new loader cache) gets the rule, not its old inode.
	return s.systemRules(ruleset, c.Policy, handled)
}

// workspaceRights are the rights of a fully permitted directory of the workspace.
func (s *Sandbox) workspaceRights(handled uint64) uint64 {
	r := handled
	if !s.workspaceExec {
		r &^= llsys.AccessFSExecute
	}
	return r
}

// readRightsOf is what a readable part of the workspace grants.
func (s *Sandbox) readRightsOf() uint64 {
	if s.workspaceExec {
		return readRights | llsys.AccessFSExecute
	}
	return readRights
}

// compile walks c's workspace and computes its rules, watching every
// directory when it can.
func (s *Sandbox) compile(c *compiled, pol PathPolicy, handled uint64) error {
	c.closeRules()
	s.cache.walks.Add(1)
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		c.inotify = in
	}
	w := &walker{c: c, pol: pol, rIno: map[uint64]bool{}, wIno: map[uint64]bool{}, dirs: map[int32]*node{}}
	rootFD, err := unix.Open(c.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: workspace %s: %w", c.root, err)
	}
	defer func() { _ = unix.Close(rootFD) }()
	var st unix.Stat_t
	if err := unix.Fstat(rootFD, &st); err != nil {
		return fmt.Errorf("sandbox: workspace %s: %w", c.root, err)
	}
	root := &node{dir: true, ino: st.Ino}
	if err := w.walkDir(rootFD, root); err != nil {
		return err
	}
	classify(root, w.rIno, w.wIno)
	e := emitter{s: s, root: c.root, rootFD: rootFD, handled: handled}
	e.emit(root, false)
	if e.err != nil {
		for _, r := range e.rules {
			_ = unix.Close(r.fd)
		}
		return e.err
	}
	c.rules, c.dirs = e.rules, w.dirs
	if w.noWatch && c.inotify >= 0 {
		_ = unix.Close(c.inotify)
		c.inotify = -1
	}
	c.valid = true
	return nil
}

// walker reads the workspace's tree and asks the policy about every entry.
type walker struct {
	c          *compiled
	pol        PathPolicy
	rIno, wIno map[uint64]bool // inodes of files refused for reading, for writing
	dirs       map[int32]*node // by watch descriptor
	noWatch    bool            // a directory could not be watched
	statFiles  bool            // look at every file's link count
	links      bool            // (statFiles) a file has another name
	buf        [8192]byte
}

func (w *walker) abs(rel string) string {
	if rel == "" {
		return w.c.root
	}
	return w.c.root + "/" + rel
}

// walkDir reads the directory open as fd, which is n.
func (w *walker) walkDir(fd int, n *node) error {
	p := w.abs(n.rel)
	n.r = w.pol.RefusesRead(p)
	n.w = n.r || w.pol.RefusesWrite(p)
	n.create = n.w || w.pol.RefusesWrite(p+"/"+probeName)
	if w.c.inotify >= 0 && !w.noWatch {
		// Watched before it is read, through the descriptor (never a path a
		// symbolic link could redirect): whatever changes after is queued.
		wd, err := unix.InotifyAddWatch(w.c.inotify, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
		if err != nil {
			w.noWatch = true
		} else {
			w.dirs[int32(wd)] = n
		}
	}
	names, types, inos, err := w.readDirents(fd, p)
	if err != nil {
		return err
	}
	for i, name := range names {
		typ := types[i]
		if typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone
			}
			typ = dtOf(st.Mode)
		}
		if typ == unix.DT_LNK {
			continue // no rule: following it reaches only what its target's rules grant
		}
		rel := name
		if n.rel != "" {
			rel = n.rel + "/" + name
		}
		kid := &node{rel: rel, ino: inos[i], dir: typ == unix.DT_DIR}
		if kid.dir {
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
					continue // changed under us: left out, so unreachable
				}
				if errors.Is(err, unix.EACCES) {
					// The gateway cannot read it either: no rule, nothing granted beneath.
					kid.r, kid.w, kid.create = true, true, true
					n.kids = append(n.kids, kid)
					continue
				}
				return fmt.Errorf("sandbox: opening %s: %w", w.abs(rel), err)
			}
			err = w.walkDir(cfd, kid)
			_ = unix.Close(cfd)
			if err != nil {
				return err
			}
		} else {
			if w.statFiles {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Nlink != 1 {
					w.links = true
				}
			}
			kp := w.abs(rel)
			kid.r = w.pol.RefusesRead(kp)
			kid.w = kid.r || w.pol.RefusesWrite(kp)
			if kid.r {
				w.rIno[kid.ino] = true
			} else if kid.w {
				w.wIno[kid.ino] = true
			}
		}
		n.kids = append(n.kids, kid)
	}
	return nil
}

// readDirents lists the directory open as fd (at p) with each entry's
// type and inode number, without . and ...
func (w *walker) readDirents(fd int, p string) (names []string, types []uint8, inos []uint64, err error) {
	for {
		k, err := unix.Getdents(fd, w.buf[:])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sandbox: reading %s: %w", p, err)
		}
		if k == 0 {
			break
		}
		for off := 0; off < k; {
			ino := *(*uint64)(unsafe.Pointer(&w.buf[off]))
			reclen := int(*(*uint16)(unsafe.Pointer(&w.buf[off+16])))
			typ := w.buf[off+18]
			name := w.buf[off+19 : off+reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if string(name) == "." || string(name) == ".." {
				continue
			}
			names, types, inos = append(names, string(name)), append(types, typ), append(inos, ino)
		}
	}
	return names, types, inos, nil
}

func dtOf(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFREG:
		return unix.DT_REG
	}
	return unix.DT_UNKNOWN
}

// classify applies the refusals of hard-linked inodes to every name of them
// and computes unreadable and unwritable bottom-up.
func classify(n *node, rIno, wIno map[uint64]bool) {
	if !n.dir {
		if rIno[n.ino] {
			n.r = true
		}
		if wIno[n.ino] {
			n.w = true
		}
		n.w = n.w || n.r
		n.unreadable, n.unwritable = n.r, n.w
		return
	}
	n.unreadable, n.unwritable = n.r, n.w || n.create
	for _, k := range n.kids {
		classify(k, rIno, wIno)
		n.unreadable = n.unreadable || k.unreadable
		n.unwritable = n.unwritable || k.unwritable
	}
}

// emitter opens the rules' descriptors beneath the walked root.
type emitter struct {
	s       *Sandbox
	root    string
	rootFD  int
	handled uint64
	rules   []rule
	err     error
}

// emit adds the rules of n; read is set when an ancestor's rule already
// grants reading everything beneath it.
func (e *emitter) emit(n *node, read bool) {
	if e.err != nil || n.r && !n.dir {
		return
	}
	readR := e.s.readRightsOf()
	switch {
	case !n.dir:
		var rights uint64
		if !read {
			rights |= readR &^ llsys.AccessFSReadDir
		}
		if !n.w {
			rights |= writeRights
		}
		e.add(n, rights)
	case !n.unreadable && !n.unwritable:
		e.add(n, e.s.workspaceRights(e.handled))
		markClean(n)
	case !n.unreadable:
		if !read {
			e.add(n, readR)
		}
		n.cover = coverRead
		for _, k := range n.kids {
			e.emit(k, true)
		}
	default:
		if !n.r && !read {
			e.add(n, llsys.AccessFSReadDir)
		}
		for _, k := range n.kids {
			e.emit(k, read)
		}
	}
}

func markClean(n *node) {
	n.cover = coverAll
	for _, k := range n.kids {
		markClean(k)
	}
}

// add opens n without following any symbolic link and checks that it is
// still the inode walked; a changed entry gets no rule.
func (e *emitter) add(n *node, rights uint64) {
	rights &= e.handled
	if rights == 0 {
		return
	}
	var fd int
	var err error
	if n.rel == "" {
		fd, err = unix.Open(e.root, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	} else {
		fd, err = unix.Openat2(e.rootFD, n.rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
			return
		}
		e.err = fmt.Errorf("sandbox: %s: %w", filepath.Join(e.root, n.rel), err)
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != n.ino || (st.Mode&unix.S_IFMT == unix.S_IFDIR) != n.dir {
		_ = unix.Close(fd)
		return
	}
	if !n.dir {
		rights &= fileRights
	}
	e.rules = append(e.rules, rule{fd: fd, rights: rights})
}

// watchMask is what the watches report: any name appearing in, leaving or
// moving within a directory, and the directory itself going away.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// stillValid drains c's watches and reports whether its rules still hold:
// nothing changed but files that are permitted, not hard links, created in
// (or removed from) directories that a rule grants every right beneath,
// which the rules already cover exactly.
func (s *Sandbox) stillValid(c *compiled, pol PathPolicy) bool {
	if c.inotify < 0 {
		return false
	}
	var buf [16384]byte
	ok := true
	for {
		k, err := unix.Read(c.inotify, buf[:])
		if err != nil || k <= 0 {
			return ok && (errors.Is(err, unix.EAGAIN) || k == 0)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if ok {
				ok = s.harmless(c, ev.Wd, ev.Mask, string(name), pol)
			}
		}
	}
}

// harmless reports whether one event leaves the rules exact, adding the
// rule a new permitted file needs where no directory's rule covers it.
func (s *Sandbox) harmless(c *compiled, wd int32, mask uint32, name string, pol PathPolicy) bool {
	n := c.dirs[wd]
	switch {
	case n == nil:
		return false
	case mask&unix.IN_DELETE_SELF != 0:
		return true // n was removed, empty
	case mask&unix.IN_ISDIR == 0:
	case mask&unix.IN_DELETE != 0:
		return true
	case mask&unix.IN_CREATE != 0:
		return s.newDir(c, n, name, pol)
	default:
		return false
	}
	switch {
	case mask&unix.IN_DELETE != 0:
		return true // the inode keeps the rules it had, and no other name gains any
	case mask&unix.IN_MOVED_FROM != 0:
		return n.cover == coverAll // it had no rule of its own, which could follow it anywhere
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
	default:
		return false
	}
	rel := name
	if n.rel != "" {
		rel = n.rel + "/" + name
	}
	p := c.root + "/" + rel
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return errors.Is(err, unix.ENOENT) // already gone again
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return true // no rule: following it reaches only what its target's rules grant
	case unix.S_IFDIR:
		return false
	}
	if st.Nlink != 1 {
		return false // another name of an inode that may be refused
	}
	r := pol.RefusesRead(p)
	w := r || pol.RefusesWrite(p)
	if mask&unix.IN_MOVED_TO != 0 && w {
		return false // a moved inode may carry a rule of its own
	}
	var rights uint64
	switch n.cover {
	case coverAll:
		return !w
	case coverRead:
		if r {
			return false
		}
	default:
		if r {
			return true // a new inode, which no rule grants
		}
		rights = s.readRightsOf() &^ llsys.AccessFSReadDir
	}
	if !w {
		rights |= writeRights
	}
	if rights == 0 {
		return true
	}
	root, err := unix.Open(c.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(root) }()
	e := emitter{s: s, root: c.root, rootFD: root, handled: ^uint64(0)}
	e.add(&node{rel: rel, ino: st.Ino}, rights)
	if e.err != nil || len(e.rules) != 1 {
		return false
	}
	c.rules = append(c.rules, e.rules[0])
	return true
}

// newDir takes in a directory created in n: it is walked and watched, and
// gets the rules it would get from a new walk of the whole workspace, or
// the whole workspace must be walked again (false).
func (s *Sandbox) newDir(c *compiled, n *node, name string, pol PathPolicy) bool {
	rel := name
	if n.rel != "" {
		rel = n.rel + "/" + name
	}
	root, err := unix.Open(c.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(root) }()
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return false
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	kid := &node{rel: rel, ino: st.Ino, dir: true}
	w := &walker{c: c, pol: pol, rIno: map[uint64]bool{}, wIno: map[uint64]bool{}, dirs: c.dirs, statFiles: true}
	if err := w.walkDir(fd, kid); err != nil || w.noWatch || w.links {
		return false
	}
	classify(kid, w.rIno, w.wIno)
	e := emitter{s: s, root: c.root, rootFD: root, handled: ^uint64(0)}
	switch n.cover {
	case coverAll:
		if kid.unreadable || kid.unwritable {
			return false
		}
		markClean(kid)
		return true
	case coverRead:
		if kid.unreadable {
			return false
		}
		e.emit(kid, true)
	default:
		e.emit(kid, false)
	}
	if e.err != nil {
		for _, r := range e.rules {
			_ = unix.Close(r.fd)
		}
		return false
	}
	c.rules = append(c.rules, e.rules...)
	return true
}

// compileSystem computes the rules of the system paths: every configured
// one the policy does not refuse.
func (s *Sandbox) compileSystem(c *compiled, pol PathPolicy) error {
	for _, p := range s.rx {
		if pol != nil && pol.RefusesSystem(p) {
			continue
		}
		fd, rights, err := openRule(p, readExec, false)
		if err != nil {
			return err
		}
		if fd < 0 {
			continue
		}
		// A directory whose every entry is forbidden (dir/**) is left out
		// too; a glob that forbids only some entries deep inside one is not
		// enforced there (system directories are not walked).
		if pol != nil && rights&llsys.AccessFSReadDir != 0 && pol.RefusesSystem(p+"/"+probeName) {
			_ = unix.Close(fd)
			continue
		}
		c.sys = append(c.sys, rule{fd: fd, rights: rights})
	}
	if s.network == NetworkAllow {
		for _, p := range resolverFiles {
			if pol != nil && pol.RefusesSystem(p) {
				continue
			}
			fd, rights, err := openRule(p, llsys.AccessFSReadFile, false)
			if err != nil {
				return err
			}
			if fd >= 0 {
				c.sys = append(c.sys, rule{fd: fd, rights: rights})
			}
		}
	}
	return nil
}

// systemRules adds the system paths' rules for a start without a policy.
func (s *Sandbox) systemRules(ruleset int, pol PathPolicy, handled uint64) error {
	c := &compiled{inotify: -1}
	defer c.close()
	if err := s.compileSystem(c, pol); err != nil {
		return err
	}
	for _, r := range c.sys {
		if err := addFDRule(ruleset, r.fd, r.rights&handled); err != nil {
			return err
		}
	}
	return s.deviceRules(ruleset, handled)
}

// deviceRules adds the device files' rules.
func (s *Sandbox) deviceRules(ruleset int, handled uint64) error {
	for p, rights := range deviceFiles {
		if err := addRule(ruleset, p, rights, handled, false); err != nil {
			return err
		}
	}
	return nil
}

// openRule opens p for a rule of rights (limited to file rights for a
// file); a missing p gives -1 unless required.
func openRule(p string, rights uint64, required bool) (int, uint64, error) {
	pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if !required && errors.Is(err, unix.ENOENT) {
			return -1, 0, nil
		}
		return -1, 0, fmt.Errorf("sandbox: %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		_ = unix.Close(pfd)
		return -1, 0, fmt.Errorf("sandbox: %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= fileRights
	}
	return pfd, rights, nil
}

// addFDRule adds a rule for the O_PATH descriptor fd.
func addFDRule(ruleset, fd int, rights uint64) error {
	if rights == 0 {
		return nil
	}
	if err := llsys.LandlockAddPathBeneathRule(ruleset, &llsys.PathBeneathAttr{AllowedAccess: rights, ParentFd: fd}, 0); err != nil {
		return fmt.Errorf("sandbox: landlock_add_rule: %w", err)
	}
	return nil
}
