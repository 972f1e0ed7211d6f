// A JavaScript plugin module: denies shell with a reason and records after-events.
import { appendFileSync } from "node:fs";

export default function (api) {
  api.on("tool:before", (ctx) => {
    if (ctx.toolName === "shell") {
      return { allow: false, reason: "deny-shell: shell is not allowed" };
    }
    return true;
  });
  api.on("tool:after", (ctx) => {
    console.log(`Tool ${ctx.toolName} completed in ${ctx.durationMs}ms`); // must not corrupt the protocol
    appendFileSync(process.env.AFTER_LOG, JSON.stringify(ctx) + "\n");
  });
}
