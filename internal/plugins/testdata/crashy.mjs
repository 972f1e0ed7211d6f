// Exits in the middle of a call to the tool "crash"; records each start.
import { appendFileSync } from "node:fs";

appendFileSync(process.env.START_LOG, `${process.pid}\n`);

export default {
  register(api) {
    api.on("tool:before", (ctx) => {
      if (ctx.toolName === "crash") {
        console.error("crashy: crashing on purpose");
        process.exit(3);
      }
      return true;
    });
  },
};
