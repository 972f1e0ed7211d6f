package sandbox

// Walks is how many times s walked a workspace to compute its rules.
func (s *Sandbox) Walks() int64 { return s.cache.walks.Load() }
