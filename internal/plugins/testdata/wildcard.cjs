// A CommonJS plugin subscribed to tool:*; denies rm by returning false.
const { appendFileSync } = require("node:fs");

module.exports = (api) => {
  api.on("tool:*", async (ctx) => {
    appendFileSync(process.env.EVENT_LOG, `${ctx.eventName} ${ctx.toolName}\n`);
    if (ctx.eventName === "tool:before" && ctx.toolName === "rm") return false;
    return undefined;
  });
};
