// Preloaded into the JS SDK walk through Tailscale Funnel (backend/e2e/funnel_jssdk_test.go): resolves
// the names in AETHER_TS_HOSTS (comma-separated) to 127.0.0.1, where the test forwards each
// connection through its loopback Funnel ingress. Node 20's fetch takes no proxy from the env.
const dns = require("node:dns");
const names = new Set((process.env.AETHER_TS_HOSTS || "").split(",").filter(Boolean));
const orig = dns.lookup;
dns.lookup = function (host, opts, cb) {
  if (typeof opts === "function") { cb = opts; opts = {}; }
  if (names.has(host)) {
    if (opts && opts.all) return process.nextTick(cb, null, [{ address: "127.0.0.1", family: 4 }]);
    return process.nextTick(cb, null, "127.0.0.1", 4);
  }
  return orig.call(dns, host, opts, cb);
};
