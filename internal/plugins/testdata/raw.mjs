// A plugin speaking the stdio protocol itself (run with TOOLHOOKS_PLUGIN_PROTOCOL=raw).
// MODE: garbage (writes a non-JSON line), nonbool ({allow:"yes"}), error (error reply),
// allow (true).
import { createInterface } from "node:readline";

const mode = process.env.MODE;
createInterface({ input: process.stdin }).on("line", (line) => {
  const req = JSON.parse(line);
  if (req.method !== "hook_before") return;
  switch (mode) {
    case "garbage":
      process.stdout.write("this is not json\n");
      break;
    case "nonbool":
      process.stdout.write(JSON.stringify({ id: req.id, result: { allow: "yes" } }) + "\n");
      break;
    case "error":
      process.stdout.write(JSON.stringify({ id: req.id, error: { code: -1, message: "policy store down" } }) + "\n");
      break;
    default:
      process.stdout.write(JSON.stringify({ id: Number(req.id), result: true }) + "\n");
  }
});
