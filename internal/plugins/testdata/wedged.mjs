// Writes its pid to PID_LOG on start, answers calls, and on the tool "wedge"
// spins forever in its event loop: it never replies to anything again.
import { appendFileSync } from "node:fs";
appendFileSync(process.env.PID_LOG, process.pid + "\n");
export function register(api) {
  api.on("tool:before", (ctx) => {
    if (ctx.toolName === "wedge") for (;;) {}
    return true;
  });
}
