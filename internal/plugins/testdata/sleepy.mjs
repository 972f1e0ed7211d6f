// Sleeps (asynchronously, SLEEP_MS, default 5 s) before answering calls to the tool "slow".
export function register(api) {
  api.on("tool:before", async (ctx) => {
    if (ctx.toolName === "slow") await new Promise((r) => setTimeout(r, Number(process.env.SLEEP_MS ?? 5000)));
    return true;
  });
}
