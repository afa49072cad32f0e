// Evaluates the node loop's ValidatingAdmissionPolicies (deploy/components/
// node-health) with a CEL evaluator, as the API server would: the match
// conditions, then the variables in order, then every validation; a
// validation that is false or fails to evaluate denies (failurePolicy Fail).
// The requests allowed are the agent's own, recorded by the fake API server
// in the loop test; the forbidden ones change them in one way each.
//
// The evidence Events (EVENTS.jsonl, one Event a line, as the fake API
// server stored them) are checked the same way when given.
//
//   CEL_MODULES=dir/node_modules node vap.cjs POLICIES.json PATCHES.jsonl POD.json [EVENTS.jsonl]
"use strict";
const fs = require("fs");
const cel = require(require.resolve("@bufbuild/cel", {
  paths: [process.env.CEL_MODULES || "."],
}));

const [policiesFile, patchesFile, podFile, eventsFile] = process.argv.slice(2);
const policies = JSON.parse(fs.readFileSync(policiesFile, "utf8"));
const SA = "system:serviceaccount:ncclguard-watchdog:ncclguard-node-loop";
const NODE_KEY = "authentication.kubernetes.io/node-name";
let passed = 0;
let failed = 0;

// JSON as the evaluator's CEL values: objects are maps, integers ints.
function toCel(v) {
  if (Array.isArray(v)) return v.map(toCel);
  if (v === null) return null;
  if (typeof v === "object") {
    const m = new Map();
    for (const [k, x] of Object.entries(v)) m.set(k, toCel(x));
    return m;
  }
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  return v;
}

function ruleMatches(rule, req) {
  const res = req.resource.resource + (req.subResource ? "/" + req.subResource : "");
  return rule.apiGroups.includes(req.resource.group) &&
    rule.operations.includes(req.operation) && rule.resources.includes(res);
}

// The policies that apply to req, and what each says: [] allowed, else the
// messages of the validations that deny.
function admit(req, object, oldObject) {
  const denied = [];
  const base = {
    request: toCel(req),
    object: toCel(object),
    oldObject: toCel(oldObject),
  };
  for (const p of policies) {
    if (!p.spec.matchConstraints.resourceRules.some((r) => ruleMatches(r, req)))
      continue;
    const act = Object.assign({}, base);
    let matched = true;
    for (const mc of p.spec.matchConditions || []) {
      if (cel.run(mc.expression, act) !== true) matched = false;
    }
    if (!matched) continue;
    const vars = new Map();
    act.variables = vars;
    for (const v of p.spec.variables || []) {
      try {
        vars.set(v.name, cel.run(v.expression, act));
      } catch (e) {
        vars.set(v.name, null);
      }
    }
    for (const v of p.spec.validations) {
      let ok;
      try {
        ok = cel.run(v.expression, act) === true;
      } catch (e) {
        ok = false;
      }
      if (!ok) denied.push(p.metadata.name + ": " + (v.message || v.messageExpression));
    }
  }
  return denied;
}

function request(resource, sub, op, node, user, group) {
  const extra = {};
  if (node !== null) extra[NODE_KEY] = [node];
  return {
    operation: op,
    resource: { group: group || "", version: "v1", resource },
    subResource: sub,
    userInfo: { username: user || SA, extra },
  };
}

function expect(what, denied, wantDenied) {
  if ((denied.length > 0) === wantDenied) {
    passed++;
  } else {
    failed++;
    console.log("FAIL: " + what + ": " + (wantDenied ? "allowed" : "denied: " + denied.join("; ")));
  }
}

const clone = (o) => JSON.parse(JSON.stringify(o));

// --- the agent's own requests are allowed ---------------------------------
const recs = fs.readFileSync(patchesFile, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const own = recs.filter((r) => r.path.endsWith("/status") ||
  (Array.isArray(r.patch) && r.patch[0] && r.patch[0].op === "test"));
let taintRec = null;
let statusRec = null;
for (const r of own) {
  const sub = r.path.endsWith("/status") ? "status" : "";
  const node = r.path.split("/")[4];
  expect("the agent's " + (sub || "node") + " patch of " + node,
    admit(request("nodes", sub, "UPDATE", node), r.after, r.before), false);
  const t = (r.after.spec.taints || []).some((x) => x.key === "ncclguard.io/nccl-unhealthy");
  if (!sub && t && taintRec === null) taintRec = r;
  if (sub && statusRec === null) statusRec = r;
}
if (own.length < 5 || taintRec === null || statusRec === null) {
  failed++;
  console.log("FAIL: the loop test recorded too few of the agent's patches");
  console.log("vap: " + passed + " passed, " + failed + " failed");
  process.exitCode = 1;
  return;
}

// --- forbidden node changes -----------------------------------------------
const B = taintRec.before;
const A = taintRec.after;
const N = A.metadata.name;
const node = (req, after) => admit(req, after, B);
const up = (n) => request("nodes", "", "UPDATE", n);
expect("a token without a node name", node(up(null), A), true);
expect("another node's agent", node(up("gpu-2"), A), true);
let x = clone(A);
x.spec.taints = x.spec.taints.filter((t) => t.key !== "nvidia.com/gpu");
expect("removing another taint", node(up(N), x), true);
x = clone(A);
x.spec.taints.push({ key: "example.com/other", effect: "NoSchedule" });
expect("adding another taint", node(up(N), x), true);
x = clone(A);
for (const t of x.spec.taints) if (t.key === "ncclguard.io/nccl-unhealthy") t.effect = "NoExecute";
expect("a NoExecute taint", node(up(N), x), true);
x = clone(A);
for (const t of x.spec.taints) if (t.key === "ncclguard.io/nccl-unhealthy") t.value = "job";
expect("a taint value other than node or pair", node(up(N), x), true);
x = clone(A);
x.metadata.labels["example.com/x"] = "y";
expect("a label", node(up(N), x), true);
x = clone(A);
x.metadata.annotations["example.com/x"] = "y";
expect("another annotation", node(up(N), x), true);
x = clone(A);
x.spec.unschedulable = true;
expect("cordoning the node", node(up(N), x), true);
expect("another user: not this policy's business",
  node(request("nodes", "", "UPDATE", N, "system:serviceaccount:kube-system:x"), x), false);

const SB = statusRec.before;
const SA_ = statusRec.after;
const st = (req, after) => admit(req, after, SB);
const ups = (n) => request("nodes", "status", "UPDATE", n);
x = clone(SA_);
for (const c of x.status.conditions) if (c.type === "Ready") c.status = "False";
expect("changing the Ready condition", st(ups(N), x), true);
x = clone(SA_);
x.status.conditions = x.status.conditions.filter((c) => c.type !== "Ready");
expect("removing the Ready condition", st(ups(N), x), true);
x = clone(SA_);
x.status.allocatable["nvidia.com/gpu"] = "0";
expect("changing allocatable GPUs", st(ups(N), x), true);
expect("another node's status", st(ups("gpu-2"), SA_), true);

// --- validation pods --------------------------------------------------------
const pod = JSON.parse(fs.readFileSync(podFile, "utf8"));
const cr = (n) => request("pods", "", "CREATE", n);
expect("the agent's validation pod", admit(cr(N), pod, null), false);
x = clone(pod);
x.spec.nodeName = "gpu-2";
expect("a validation pod on another node", admit(cr(N), x, null), true);
x = clone(pod);
delete x.metadata.labels["ncclguard.io/validation-for"];
expect("a pod without the validation label", admit(cr(N), x, null), true);
x = clone(pod);
x.spec.hostPID = true;
expect("a pod with hostPID", admit(cr(N), x, null), true);
x = clone(pod);
x.spec.containers[0].securityContext = { privileged: true };
expect("a privileged pod", admit(cr(N), x, null), true);

// --- the evidence Events ------------------------------------------------------
const WD = "system:serviceaccount:ncclguard-watchdog:ncclguard-watchdog";
const evs = eventsFile && fs.existsSync(eventsFile)
  ? fs.readFileSync(eventsFile, "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l))
  : [];
const pair = evs.find((e) => e.reason === "NCCLNodePairFailed");
const lost = evs.find((e) => e.reason === "NCCLGPULost");
const ev = (user, n, e, group) => admit(request("events", "", "CREATE", n, user, group), e, null);
if (eventsFile) {
  if (!pair || !lost) {
    failed++;
    console.log("FAIL: the loop test recorded no pair or lost-GPU Event");
  } else {
    const from = pair.reportingInstance;
    expect("the node loop's pair Event", ev(SA, from, pair), false);
    expect("a pair Event from another node's token", ev(SA, pair.involvedObject.name, pair), true);
    x = clone(pair);
    x.reportingInstance = "gpu-9";
    expect("a pair Event that names another reporter", ev(SA, from, x), true);
    expect("a pair Event posted by the watchdog", ev(WD, from, pair), true);
    expect("a pair Event posted by someone else", ev("system:serviceaccount:ml:default", from, pair), true);
    const on = lost.involvedObject.name;
    expect("the watchdog's lost-GPU Event", ev(WD, on, lost), false);
    expect("a lost-GPU Event from another node's watchdog", ev(WD, "gpu-7", lost), true);
    x = clone(lost);
    x.reportingInstance = "gpu-7";
    expect("a lost-GPU Event about another Node, from gpu-7's watchdog", ev(WD, "gpu-7", x), true);
    expect("a lost-GPU Event posted by the node loop", ev(SA, on, lost), true);
    expect("a lost-GPU Event posted by someone else", ev("system:serviceaccount:ml:default", on, lost), true);
    expect("a lost-GPU Event through events.k8s.io", ev(WD, on, lost, "events.k8s.io"), true);
    x = clone(lost);
    x.reason = "NCCLHang";
    expect("another reason: not this policy's business", ev("system:serviceaccount:ml:default", "gpu-7", x), false);
  }
}

// Output to a pipe is written asynchronously: set the status and let Node
// exit on its own, after the last line is out.
console.log("vap: " + passed + " passed, " + failed + " failed");
process.exitCode = failed === 0 ? 0 : 1;
