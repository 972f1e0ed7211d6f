// toolhooks Node.js plugin bridge.
//
// Runs a JavaScript plugin module (a default export that registers handlers
// with api.on) and speaks the stdio plugin protocol for it: newline-delimited
// JSON requests
// {"method","id","params"} on stdin, replies {"id","result"} or
// {"id","error":{"code","message"}} on stdout.
//
// The gateway runs it as `node --input-type=module -e <this file> -- <plugin> [args...]`
// (see internal/plugins). The plugin module may be any of:
//   export default function (api) { ... }          // ESM default export
//   export function register(api) { ... }          // ESM named export
//   export default { register(api) { ... } }       // object with register
//   module.exports = (api) => { ... }              // CommonJS (.cjs, or .js without "type":"module")
//   module.exports = { register(api) { ... } }
// The registration function may be async. Handlers are registered with
//   api.on("tool:before", ctx => ...)  // return false or {allow:false, reason} to deny
//   api.on("tool:after",  ctx => ...)  // return value ignored
//   api.on("tool:*",      ctx => ...)  // both; ctx.eventName says which
// ctx has eventName, toolName, arguments (the JSON text), sessionId, channelId,
// senderId, correlationId, and after the call result, durationMs and failed.
// Handlers may return a Promise. console output goes to stderr, so that
// stdout carries only the protocol.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { format } from "node:util";

const BEFORE = "tool:before";
const AFTER = "tool:after";
const ANY = "tool:*";

const writeOut = process.stdout.write.bind(process.stdout);
const logErr = (...a) => process.stderr.write(format(...a) + "\n");
for (const m of ["log", "info", "debug", "warn", "error", "trace", "dir"]) {
  console[m] = logErr;
}

const handlers = { [BEFORE]: [], [AFTER]: [] };

const api = {
  on(event, handler) {
    if (typeof handler !== "function") {
      throw new TypeError(`api.on(${JSON.stringify(event)}): the handler must be a function`);
    }
    if (event === ANY) {
      handlers[BEFORE].push(handler);
      handlers[AFTER].push(handler);
    } else if (event === BEFORE || event === AFTER) {
      handlers[event].push(handler);
    } else {
      logErr(`toolhooks bridge: ignoring subscription to unsupported event ${JSON.stringify(event)}`);
    }
    return api;
  },
  logger: { debug: logErr, info: logErr, warn: logErr, error: logErr },
};

function send(msg) {
  writeOut(JSON.stringify(msg) + "\n");
}

// decide turns one handler's return value into a verdict; undefined/null/true allow.
function decide(v) {
  if (v === undefined || v === null || v === true) return { allow: true };
  if (v === false) return { allow: false };
  if (typeof v === "object" && typeof v.allow === "boolean") {
    const out = { allow: v.allow };
    if (typeof v.reason === "string" && v.reason !== "") out.reason = v.reason;
    return out;
  }
  throw new Error(`tool:before handler returned ${JSON.stringify(v)}; want a boolean or {allow: boolean, reason?: string}`);
}

const isThenable = (v) => v !== null && (typeof v === "object" || typeof v === "function") && typeof v.then === "function";

// before runs the tool:before handlers in order; the first denial wins. It
// stays synchronous while handlers return plain values (the common case, and
// the fast one) and continues asynchronously from the first Promise.
function before(ctx, from = 0) {
  const hs = handlers[BEFORE];
  for (let i = from; i < hs.length; i++) {
    const r = hs[i](ctx);
    if (isThenable(r)) {
      return Promise.resolve(r).then((v) => {
        const verdict = decide(v);
        return verdict.allow ? before(ctx, i + 1) : verdict;
      });
    }
    const verdict = decide(r);
    if (!verdict.allow) return verdict;
  }
  return { allow: true };
}

async function after(ctx) {
  for (const h of handlers[AFTER]) {
    try {
      await h(ctx);
    } catch (e) {
      logErr(`toolhooks bridge: tool:after handler failed: ${e?.stack ?? e}`);
    }
  }
  return null;
}

// handle returns a request's result, or a Promise of it.
function handle(req) {
  const p = req.params ?? {};
  switch (req.method) {
    case "hook_before":
      return before({ ...p, eventName: BEFORE });
    case "hook_after":
      return after({ ...p, eventName: AFTER });
    case "ping":
      return { pong: true };
    default:
      throw Object.assign(new Error(`unknown method ${JSON.stringify(req.method)}`), { code: -32601 });
  }
}

let inflight = 0;
let closing = false;

function done() {
  inflight--;
  if (closing && inflight === 0) process.exit(0);
}

function replyError(id, e) {
  const code = Number.isInteger(e?.code) ? e.code : -1;
  send({ id, error: { code, message: String(e?.message ?? e) } });
}

function onLine(line) {
  if (line.trim() === "") return;
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    logErr(`toolhooks bridge: ignoring a request that is not JSON: ${e.message}`);
    return;
  }
  inflight++;
  let result;
  try {
    result = handle(req);
  } catch (e) {
    replyError(req.id, e);
    done();
    return;
  }
  if (!isThenable(result)) {
    send({ id: req.id, result });
    done();
    return;
  }
  result.then(
    (r) => send({ id: req.id, result: r }),
    (e) => replyError(req.id, e),
  ).finally(done);
}

// readLines calls onLine for each newline-terminated line of stdin.
function readLines(onClose) {
  let buf = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      onLine(line);
    }
  });
  process.stdin.on("end", () => {
    if (buf !== "") onLine(buf);
    onClose();
  });
}

async function main() {
  const file = process.argv[1];
  if (!file) {
    logErr("toolhooks bridge: usage: node bridge.mjs <plugin file> [args...]");
    process.exit(2);
  }
  const mod = await import(pathToFileURL(resolve(file)).href);
  const candidates = [mod.default, mod.register, mod.default?.register, mod.default?.default];
  const register = candidates.find((c) => typeof c === "function");
  if (!register) {
    throw new Error(`${file} exports no registration function (default export, register, or module.exports)`);
  }
  // A CommonJS/ESM object with register is called as a method.
  await (register === mod.default?.register ? register.call(mod.default, api) : register(api));
  // When stdin closes the gateway is stopping the plugin: finish the requests
  // in flight, then exit even if the plugin holds timers.
  readLines(() => {
    closing = true;
    if (inflight === 0) process.exit(0);
  });
}

main().catch((e) => {
  logErr(`toolhooks bridge: loading the plugin failed: ${e?.stack ?? e}`);
  process.exit(1);
});
