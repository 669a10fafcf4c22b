// Drives a claim's lifecycle through openapi-fetch typed by the types
// openapi-typescript generates from spec/openapi.yaml (schema.d.ts, next
// to this file, written by TestTypeScriptClientLifecycle), against a live
// DotLab server:
//
//   node lifecycle.js BASE_URL MANIFEST EXTREME_MANIFEST (the manifests' text)
//
// It prints "ok", or throws naming the step. tsc --strict type-checks it
// first, so a required field the types made optional (ClaimDetail.manifest,
// PublishedRunBody's fields) fails the build. Decimals are `number` here:
// openapi-typescript reads `format: decimal` as a double; the limits this
// has are checked as documented (spec/README.md).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

// Node's process, declared here so that the check needs no @types/node.
declare const process: { argv: string[] };

const [base, manifestText, extremeText] = process.argv.slice(2);
if (!base || !manifestText || !extremeText) throw new Error("usage: lifecycle BASE_URL MANIFEST EXTREME_MANIFEST");

function client(key?: string): Client<paths> {
  return createClient<paths>({ baseUrl: base, headers: key ? { Authorization: `Bearer ${key}` } : {} });
}

function want<T>(what: string, r: { data?: T; error?: unknown; response: Response }, status: number): T {
  if (r.response.status !== status || r.data === undefined) {
    throw new Error(`${what}: ${r.response.status} ${JSON.stringify(r.error)}, want ${status}`);
  }
  return r.data;
}

const anon = client();
const agents: Record<string, { id: string; c: Client<paths> }> = {};

async function register(): Promise<void> {
  want("status", await anon.GET("/status"), 200);
  for (const name of ["submitter", "runner", "challenger", "reviewer1", "reviewer2", "reviewer3"]) {
    const a = want("register " + name, await anon.POST("/agents", { body: { name, operator: "openapi-typescript test", capabilities: ["python"] } }), 201);
    agents[name] = { id: a.agent_id, c: client(a.api_key) };
  }
  const me = want("me", await agents.runner.c.GET("/agents/me"), 200);
  if (me.agent_id !== agents.runner.id) throw new Error(`me: ${JSON.stringify(me)}`);
}

async function list(manifest: string): Promise<Schemas["ClaimDetail"]> {
  return want("list claim", await agents.submitter.c.POST("/claims", { body: { manifest, field: "statistics" } }), 201);
}

async function take(claim: string): Promise<void> {
  const runner = agents.runner.c;
  const job = want("draw", await runner.GET("/jobs/next"), 200);
  if (job.claim_id !== claim || job.state !== "offered") throw new Error(`drew ${JSON.stringify(job)}`);
  const acc = want("accept", await runner.POST("/jobs/{id}/accept", { params: { path: { id: claim } } }), 200);
  if (!acc.publish_deadline) throw new Error("accepted without a deadline");
}

// runBody reruns the claim's manifest with the given values: its datasets'
// hashes, image digest and seed as the claim (ClaimDetail.manifest,
// required) gives them.
function runBody(claim: Schemas["ClaimDetail"], values: Record<string, number>): Schemas["RunFields"] {
  const m: Schemas["ManifestView"] = claim.manifest;
  const input_hashes: Schemas["HashMap"] = {};
  for (const ds of m.datasets) input_hashes[ds.name] = ds.sha256;
  const comparisons: Schemas["RunComparison"][] = m.targets.map((t) => ({ name: t.name, rerun: values[t.name] }));
  return { input_hashes, output_hashes: {}, environment: { image_digest: m.environment.image.split("@")[1], seed: m.seed ?? null }, comparisons };
}

async function publish(claim: Schemas["ClaimDetail"], values: Record<string, number>, outcome: Schemas["Outcome"]): Promise<Schemas["Run"]> {
  const body: Schemas["RunBody"] = { ...runBody(claim, values), job_id: claim.id, outcome };
  return want("publish", await agents.runner.c.POST("/runs", { body }), 201);
}

async function firstEvent(claim: string): Promise<void> {
  const r = await anon.GET("/labs/{id}/events", { params: { path: { id: claim } }, parseAs: "stream" });
  if (r.response.status !== 200 || !r.data) throw new Error(`events: ${r.response.status}`);
  const reader = r.data.getReader();
  let text = "";
  while (!text.includes("\nevent: ")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the stream ended before an event");
    text += new TextDecoder().decode(value);
  }
  await reader.cancel();
}

async function challenge(claim: Schemas["ClaimDetail"]): Promise<void> {
  const body: Schemas["ChallengeBody"] = {
    ...runBody(claim, { mean_diff: 1.58, t_paired: 4.0621239 }), claim_id: claim.id, agrees: false, outcome: "not_reproduced",
    notes: "t_paired: my rerun 4.0621239 vs the run's 4.0621234567, difference 0.0000004433, beyond the relative tolerance 1e-9",
  };
  const ch = want("challenge", await agents.challenger.c.POST("/challenges", { body }), 201);
  const d = ch.differences[1];
  // A double: the exact 0.0000004433 reads as the nearest double.
  if (d.name !== "t_paired" || d.delta !== 0.0000004433 || d.challenger !== 4.0621239) throw new Error(`difference ${JSON.stringify(d)}`);
}

async function votes(claim: string): Promise<void> {
  const sides: Schemas["VoteBody"]["vote"][] = ["runner", "runner", "challenger"];
  for (const [i, vote] of sides.entries()) {
    const rev = agents[`reviewer${i + 1}`].c;
    const dp = want("draw a dispute", await rev.GET("/disputes/next"), 200);
    if (dp.dispute_id !== claim || dp.votes.length !== i) throw new Error(`reviewer ${i + 1} drew ${dp.dispute_id}`);
    const rationale = "t_paired: the runner's 4.0621234567 equals the published value; the challenger's 4.0621239 does not";
    const after = want("vote", await rev.POST("/disputes/{id}/vote", { params: { path: { id: claim } }, body: { vote, rationale } }), 200);
    if ((after.claim.state === "settled") !== (i === 2)) throw new Error(`after vote ${i + 1}: ${after.claim.state}`);
    // Dispute.claim carries its manifest (required).
    if (after.claim.manifest.targets.length !== 2) throw new Error("the dispute's claim has no manifest");
  }
}

// extreme: the difference of the largest and most negative doubles is
// beyond a double's range: the server sends it exactly, JSON.parse (and so
// this client) reads Infinity, the documented limit.
async function extreme(manifest: string): Promise<void> {
  const claim = await list(manifest);
  await take(claim.id);
  const run = await publish(claim, { mean_diff: 1.58, huge: -1.7976931348623157e308 }, "not_reproduced");
  const raw = await (await fetch(`${base}/runs/${run.id}`)).text();
  if (!raw.includes('"difference":3.5953862697246314e308')) throw new Error(`the server's text: ${raw.slice(0, 400)}`);
  if (run.comparisons[1].difference !== Infinity) throw new Error(`difference read as ${run.comparisons[1].difference}`);
}

async function main(): Promise<void> {
  await register();
  const claim = await list(manifestText);
  if (claim.manifest.targets[1].value !== 4.0621234567) throw new Error("t_paired target");
  const page = want("claims", await anon.GET("/claims", { params: { query: { state: "funded" } } }), 200);
  if (page.claims.length !== 1 || page.claims[0].id !== claim.id) throw new Error("funded claims");
  await take(claim.id);
  const run = await publish(claim, { mean_diff: 1.58, t_paired: 4.0621234567 }, "reproduced");
  if (run.comparisons[1].rerun !== 4.0621234567 || run.comparisons[1].difference !== 0 || !run.comparisons[1].match) throw new Error("t_paired compared");
  const got = want("run", await anon.GET("/runs/{id}", { params: { path: { id: run.id } } }), 200);
  if (got.body.comparisons?.[1].rerun !== 4.0621234567 || got.body.job_id !== claim.id) throw new Error("the run's body");
  await firstEvent(claim.id);
  await challenge(claim);
  await votes(claim.id);
  const settled = want("claim", await anon.GET("/claims/{id}", { params: { path: { id: claim.id } } }), 200);
  if (settled.state !== "settled" || settled.outcome !== "reproduced") throw new Error(`settled: ${settled.state}`);
  await extreme(extremeText);
  console.log("ok");
}

await main();
