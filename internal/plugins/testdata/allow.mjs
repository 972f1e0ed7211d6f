// Allows everything (benchmarks).
export default (api) => api.on("tool:before", () => true);
