//! The policy analysis (`ctxpack::analysis`) held to the runtime.
//!
//! Random packs in the analysed fragment are checked, built and compiled with
//! `PreparedPack`. Every witness a diagnostic or the `explain --tools` table names is
//! compiled and must do what the claim says: the policies it names fire together, the
//! tool is surfaced or withheld. No sampled request may contradict a claim that
//! something cannot happen: a policy that never fires (W0301), one that fires only
//! under a higher-priority refusal (W0302), one that fails to fire (W0202 says it
//! always fires), a tool never surfaced (W0405), a tool always surfaced or always
//! withheld. Then the CLI (`explain --tools`, the `witness`
//! member of `check --format json` and SARIF), the budget, and the bundled packs.

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;
use ctxpack::analysis::{self, Limits, Status};
use ctxpack::runtime::{decode_inputs, CompiledContext, PreparedPack};
use proptest::prelude::*;
use serde_json::{json, Value};

// ── Random packs ─────────────────────────────────────────────────────────────────

/// A deterministic generator (an LCG), so that a failing seed replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const HEAD: &str = r#"pack "acme/analysis-props" version "1.0.0"

context {
  age: int
  score: float
  tier: enum("free", "pro", "enterprise")
  country: string
  verified: bool
  flags: list<string>
  total: float?
  count: int?
  plan: enum("a", "b")?
  note: string?
}

prompt system "You are ACME's support assistant."

budget {
  total 16_000
  tokenizer approx
  bucket policy   { share 10% }
  bucket tools    { share 10% }
  bucket evidence { share 50% }
  bucket memory   { share 10% }
  bucket session  { share 20% }
}

tool lookup {
  description "Fetch an order by its id."
  kind read
  risk low
  approval auto
}

tool credit {
  description "Add store credit."
  kind write
  risk medium
  approval auto
}

tool refund {
  description "Refund an order."
  kind write
  risk high
  approval confirm
}

tool reset {
  description "Reset the second factor."
  kind admin
  risk critical
  approval review
}

intent refund_flow {
  safety supervised
  tools lookup, credit, refund
  task "Help with a refund."
}

intent admin {
  safety reviewed
  tools lookup, credit, reset
  task "Help with the account."
}

intent general fallback {
  tools lookup
  task "Answer questions."
}
"#;

const INTENTS: [&str; 3] = ["refund_flow", "admin", "general"];
const MODES: [&str; 3] = ["autonomous", "supervised", "reviewed"];
const TOOLS: [&str; 4] = ["lookup", "credit", "refund", "reset"];

/// Comparisons of every kind the fragment covers, over constants that overlap so
/// that policies meet, shadow and exclude each other.
const ATOMS: &[&str] = &[
    "ctx.age < 18",
    "ctx.age >= 18",
    "ctx.age > 65",
    "ctx.age == 17",
    "ctx.age != 40",
    "ctx.score > 1.0",
    "ctx.score <= 0.5",
    "ctx.score == 2.5",
    "ctx.tier == \"free\"",
    "ctx.tier != \"pro\"",
    "ctx.tier in [\"pro\", \"enterprise\"]",
    "ctx.country == \"KP\"",
    "ctx.country in [\"KP\", \"CU\"]",
    "ctx.country != \"US\"",
    "ctx.verified",
    "not ctx.verified",
    "\"vip\" in ctx.flags",
    "\"fraud\" in ctx.flags",
    "exists(ctx.total) and ctx.total > 500.0",
    "ctx.total < 10.0",
    "not exists(ctx.total)",
    "ctx.count == 3",
    "exists(ctx.count)",
    "ctx.count >= 2",
    "ctx.plan == \"a\"",
    "ctx.plan != \"b\"",
    "exists(ctx.plan)",
    "ctx.note == \"x\"",
    "exists(ctx.note)",
    "request.channel == \"voice\"",
    "request.channel != \"web\"",
    "request.intent == \"refund_flow\"",
    "request.intent in [\"admin\", \"general\"]",
    "request.intent != \"general\"",
    "run.safety_mode == \"autonomous\"",
    "run.safety_mode != \"reviewed\"",
    "\"admin\" in run.user.roles",
    "exists(run.tenant)",
    "run.tenant == \"acme\"",
    "json {\"==\": [{\"var\": \"request.channel\"}, \"voice\"]}",
    "json {\"!=\": [{\"var\": \"ctx.tier\"}, \"free\"]}",
    "json {\"!!\": [{\"var\": \"ctx.verified\"}]}",
    "ctx.age < 18 and ctx.age > 65",
];

fn condition(rng: &mut Rng) -> String {
    let n = 1 + rng.below(3);
    let atoms: Vec<String> = (0..n).map(|_| format!("({})", rng.pick(ATOMS))).collect();
    let joined = atoms.join(if rng.below(3) == 0 { " or " } else { " and " });
    match rng.below(6) {
        0 => format!("not ({joined})"),
        1 if n == 1 => "true".to_owned(),
        _ => joined,
    }
}

fn effect(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 | 1 => format!("refuse \"{}\"", rng.pick(&["Reason A.", "Reason B."])),
        2 => format!("escalate \"{}\"", rng.pick(&["desk-a", "desk-b"])),
        3 => format!("deny {}", rng.pick(&TOOLS)),
        4 => format!("require_approval {}", rng.pick(&["lookup", "credit"])),
        _ => "instruct \"A note.\"".to_owned(),
    }
}

fn random_pack(seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut text = HEAD.to_owned();
    for p in 0..3 + rng.below(6) {
        let priority = rng.pick(&[0, 10, 10, 20]);
        let advisory = if rng.below(5) == 0 { " advisory" } else { "" };
        text.push_str(&format!(
            "\npolicy p{p} priority {priority}{advisory} {{\n  when {}\n  {}\n}}\n",
            condition(&mut rng),
            effect(&mut rng)
        ));
    }
    text
}

// ── Requests ─────────────────────────────────────────────────────────────────────

/// A complete, valid request for `intent` in `mode`; witnesses are merged over it.
fn base(intent: &str, mode: &str) -> Value {
    json!({
        "run": { "run_id": "r-1", "safety_mode": mode },
        "request": {
            "request_id": "q-1",
            "intent": intent,
            "message": "Hello.",
            "channel": "web",
            "locale": "en",
            "context": {
                "age": 40, "score": 1.5, "tier": "pro", "country": "US",
                "verified": true, "flags": []
            }
        }
    })
}

/// A random valid request, over values around the constants the atoms use.
fn random_request(rng: &mut Rng) -> Value {
    let mut context = json!({
        "age": rng.pick(&[-1, 0, 16, 17, 18, 19, 40, 65, 66]),
        "score": rng.pick(&[-1.0, 0.0, 0.5, 0.75, 1.0, 2.0, 2.5, 3.0]),
        "tier": rng.pick(&["free", "pro", "enterprise"]),
        "country": rng.pick(&["US", "KP", "CU", "FR"]),
        "verified": rng.below(2) == 0,
        "flags": subset(rng, &["vip", "fraud", "other"]),
    });
    let optional = [
        (
            "total",
            vec![
                json!(0.0),
                json!(5.0),
                json!(10.0),
                json!(500.0),
                json!(501.0),
            ],
        ),
        ("count", vec![json!(0), json!(2), json!(3), json!(4)]),
        ("plan", vec![json!("a"), json!("b")]),
        ("note", vec![json!("x"), json!("y"), json!("")]),
    ];
    for (name, values) in optional {
        if rng.below(3) > 0 {
            context[name] = rng.pick(&values).clone();
        }
    }
    let mut run = json!({
        "run_id": "r-1",
        "safety_mode": rng.pick(&MODES),
        "user": { "roles": subset(rng, &["admin", "agent"]) },
    });
    if rng.below(2) == 0 {
        run["tenant"] = json!(rng.pick(&["acme", "other"]));
    }
    json!({
        "run": run,
        "request": {
            "request_id": "q-1",
            "intent": rng.pick(&INTENTS),
            "message": "Hello.",
            "channel": rng.pick(&["voice", "web", "email"]),
            "locale": "en",
            "context": context,
        }
    })
}

fn subset(rng: &mut Rng, items: &[&str]) -> Value {
    json!(items
        .iter()
        .filter(|_| rng.below(2) == 0)
        .copied()
        .collect::<Vec<_>>())
}

/// `patch` over `base`: objects merge, anything else replaces, `null` removes.
fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(k);
                } else {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

fn compile(pack: &PreparedPack, inputs: &Value) -> CompiledContext {
    let decoded = decode_inputs(inputs["run"].clone(), inputs["request"].clone(), None, None)
        .unwrap_or_else(|e| panic!("invalid inputs {inputs}: {e}"));
    pack.compile(&decoded)
        .unwrap_or_else(|e| panic!("compile failed for {inputs}: {e}"))
}

fn fired(cc: &CompiledContext, policy: &str) -> bool {
    cc.manifests
        .policy_manifest
        .iter()
        .any(|p| &*p.policy == policy && p.fired)
}

fn surfaced(cc: &CompiledContext, tool: &str) -> bool {
    cc.manifests
        .tool_manifest
        .iter()
        .any(|t| &*t.name == tool && t.surfaced)
}

/// The names a message quotes in backticks, in order.
fn quoted(message: &str) -> Vec<String> {
    message
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

// ── The claims ───────────────────────────────────────────────────────────────────

/// How often each kind of claim was checked.
#[derive(Debug, Default)]
struct Counts(BTreeMap<&'static str, usize>);

impl Counts {
    fn add(&mut self, what: &'static str) {
        *self.0.entry(what).or_default() += 1;
    }
}

/// Checks every claim the analysis makes about the pack of `seed` against the runtime.
fn check_claims(seed: u64, counts: &mut Counts) {
    let text = random_pack(seed);
    let checked = ctxpack::check::check_source(&text);
    assert!(
        !checked.has_errors(),
        "seed {seed}: generated pack has errors:\n{text}"
    );
    let built = ctxpack::build::build_source("props.ctxpack", text.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: {}", e.summary()));
    let pack = PreparedPack::new(built.artifact).expect("the pack prepares");
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let samples: Vec<(Value, CompiledContext)> = (0..120)
        .map(|_| {
            let inputs = random_request(&mut rng);
            let cc = compile(&pack, &inputs);
            (inputs, cc)
        })
        .collect();
    let ctx = |what: &str, inputs: &Value| format!("seed {seed}: {what}\ninputs {inputs}\n{text}");

    for d in &checked.diagnostics {
        let names = quoted(&d.message);
        let witness = d.witness.as_ref().map(|w| {
            let mut inputs = base("general", "supervised");
            merge(&mut inputs, w);
            (inputs.clone(), compile(&pack, &inputs))
        });
        match d.code {
            "W0301" => {
                counts.add("W0301");
                for (inputs, cc) in &samples {
                    assert!(!fired(cc, &names[0]), "{}", ctx(&d.message, inputs));
                }
            }
            // The analysis's W0202 (its help names the policy): it always fires.
            "W0202" => {
                let help = d.help.as_deref().unwrap_or_default();
                let Some(policy) = help
                    .split_once("if policy `")
                    .and_then(|(_, rest)| rest.split_once('`'))
                    .map(|(name, _)| name)
                else {
                    continue;
                };
                counts.add("W0202");
                for (inputs, cc) in &samples {
                    assert!(fired(cc, policy), "{}", ctx(&d.message, inputs));
                }
            }
            "W0302" => {
                counts.add("W0302");
                let (p, refusals) = (&names[0], &names[1..]);
                let (inputs, cc) = witness.expect("W0302 names a witness");
                assert!(
                    fired(&cc, p) && fired(&cc, &refusals[0]) && cc.runtime_controls.must_refuse,
                    "{}",
                    ctx(&d.message, &inputs)
                );
                for (inputs, cc) in &samples {
                    if fired(cc, p) {
                        assert!(
                            refusals.iter().any(|r| fired(cc, r)),
                            "{}",
                            ctx(&d.message, inputs)
                        );
                    }
                }
            }
            "W0303" => {
                counts.add("W0303");
                let (inputs, cc) = witness.expect("W0303 names a witness");
                assert!(
                    fired(&cc, &names[0]) && fired(&cc, &names[1]),
                    "{}",
                    ctx(&d.message, &inputs)
                );
            }
            "W0405" => {
                counts.add("W0405");
                let tool = &names[0];
                let permitting: Vec<&str> = checked
                    .pack
                    .intents
                    .iter()
                    .filter(|i| i.tools.iter().any(|t| *t.name == **tool))
                    .map(|i| i.name.as_str())
                    .collect();
                for (inputs, cc) in &samples {
                    if permitting.contains(&cc.intent.name.as_str())
                        && !cc.runtime_controls.must_refuse
                    {
                        assert!(!surfaced(cc, tool), "{}", ctx(&d.message, inputs));
                    }
                }
            }
            "W0304" => panic!("seed {seed}: a small pack hit the analysis limit"),
            _ => {}
        }
    }

    let table = analysis::tool_table(&checked.pack).expect("the pack has intents");
    assert!(table.complete);
    for row in &table.intents {
        for m in &row.modes {
            let (intent, mode) = (row.intent.as_str(), m.mode.as_str());
            let here: Vec<&(Value, CompiledContext)> = samples
                .iter()
                .filter(|(inputs, cc)| {
                    cc.intent.name == intent && inputs["run"]["safety_mode"] == mode
                })
                .collect();
            for t in &m.tools {
                let what = format!("{} in {intent}/{mode}: {:?}", t.tool, t.status);
                match &t.status {
                    Status::Surfaced => {
                        counts.add("surfaced");
                        for (inputs, cc) in &here {
                            if !cc.runtime_controls.must_refuse {
                                assert!(surfaced(cc, &t.tool), "{}", ctx(&what, inputs));
                            }
                        }
                    }
                    Status::Withheld(_) => {
                        counts.add("withheld");
                        for (inputs, cc) in &here {
                            if !cc.runtime_controls.must_refuse {
                                assert!(!surfaced(cc, &t.tool), "{}", ctx(&what, inputs));
                            }
                        }
                    }
                    Status::Refused { .. } => {
                        counts.add("refused");
                        for (inputs, cc) in &here {
                            assert!(cc.runtime_controls.must_refuse, "{}", ctx(&what, inputs));
                        }
                    }
                    Status::Conditional {
                        surfaced: yes,
                        withheld: no,
                        unknown,
                        ..
                    } => {
                        counts.add("conditional");
                        assert!(unknown.is_empty(), "{what}");
                        for (w, expected) in [(yes, true), (no, false)] {
                            let mut inputs = base(intent, mode);
                            merge(&mut inputs, &w.to_json());
                            let cc = compile(&pack, &inputs);
                            assert!(
                                !cc.runtime_controls.must_refuse
                                    && surfaced(&cc, &t.tool) == expected,
                                "{}",
                                ctx(&format!("{what} (witness for {expected})"), &inputs)
                            );
                        }
                    }
                    Status::Undetermined { .. } | Status::NotAnalysed => {
                        panic!("seed {seed}: {what}: every generated condition is analysed")
                    }
                }
            }
        }
    }
}

/// A fixed run of seeds, which must exercise every kind of claim.
#[test]
fn claims_hold_at_run_time_over_fixed_seeds() {
    let mut counts = Counts::default();
    for seed in 0..120 {
        check_claims(seed, &mut counts);
    }
    eprintln!("claims checked: {counts:?}");
    for what in [
        "W0202",
        "W0301",
        "W0302",
        "W0303",
        "W0405",
        "surfaced",
        "withheld",
        "conditional",
    ] {
        assert!(
            counts.0.get(what).copied().unwrap_or(0) > 0,
            "no claim of kind {what} was checked: {counts:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn claims_hold_at_run_time(seed in any::<u64>()) {
        check_claims(seed, &mut Counts::default());
    }
}

// ── Exactness on hand-written cases ──────────────────────────────────────────────

fn pack_with(policies: &str) -> String {
    format!("{HEAD}\n{policies}")
}

fn codes(text: &str) -> Vec<&'static str> {
    ctxpack::check::check_source(text)
        .diagnostics
        .iter()
        .map(|d| d.code)
        .filter(|c| c.starts_with("W03") || *c == "W0405")
        .collect()
}

#[test]
fn adjacent_ranges_and_points_are_told_apart() {
    // 17 < age < 18 has no integer; 17.5 is a float.
    let text = pack_with(
        "policy a priority 1 {\n  when ctx.age > 17 and ctx.age < 18\n  instruct \"x\"\n}\n\
         policy b priority 1 {\n  when ctx.score > 17.0 and ctx.score < 18.0\n  instruct \"x\"\n}\n",
    );
    assert_eq!(codes(&text), ["W0301"]);
    // A missing `total` counts as 0 in an order comparison, so `< 10.0` fires on it:
    // a refusal of present totals does not shadow it.
    let text = pack_with(
        "policy r priority 9 {\n  when exists(ctx.total)\n  refuse \"x\"\n}\n\
         policy p priority 1 {\n  when ctx.total < 10.0\n  instruct \"x\"\n}\n",
    );
    assert_eq!(codes(&text), Vec::<&str>::new());
}

#[test]
fn a_policy_outside_the_fragment_is_never_a_subject_or_a_proof() {
    // The raw arithmetic refusal covers `p` in fact, but it is not analysed, so `p` is
    // not reported as shadowed; and its own impossibility is not reported either.
    let text = pack_with(
        "policy r priority 9 {\n  when json {\">\": [{\"+\": [{\"var\": \"ctx.age\"}, 0]}, 17]}\n  refuse \"x\"\n}\n\
         policy p priority 1 {\n  when ctx.age > 30\n  instruct \"x\"\n}\n\
         policy q priority 1 {\n  when json {\"<\": [{\"*\": [{\"var\": \"ctx.age\"}, 0]}, -1]}\n  instruct \"x\"\n}\n",
    );
    assert_eq!(codes(&text), Vec::<&str>::new());
    let table = analysis::tool_table(&ctxpack::check::check_source(&text).pack).unwrap();
    assert!(table.complete);
}

#[test]
fn the_budget_reports_instead_of_blowing_up() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/err/7041_w0304_exponential_condition.ctxpack");
    let text = std::fs::read_to_string(path).unwrap();
    let checked = ctxpack::check::check_source(&text);
    let w0304: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.code == "W0304")
        .collect();
    assert_eq!(w0304.len(), 1);
    // With a tiny budget, every pack stops early, reports once, and never panics.
    let text = pack_with(
        "policy r priority 9 {\n  when ctx.age < 18 and request.channel == \"voice\"\n  refuse \"x\"\n}\n\
         policy p priority 1 {\n  when ctx.age < 16 and request.channel == \"voice\"\n  deny credit\n}\n",
    );
    let pack = ctxpack::check::check_source(&text).pack;
    for (nodes, steps) in [(3, 1_000), (30, 5), (1_000, 0)] {
        let limits = Limits {
            max_nodes: nodes,
            max_steps: steps,
        };
        let mut diagnostics = Vec::new();
        analysis::check_with(&pack, limits, &mut diagnostics);
        assert!(
            diagnostics.iter().any(|d| d.code == "W0304"),
            "{nodes}/{steps}"
        );
        let table = analysis::tool_table_with(&pack, limits).unwrap();
        assert!(!table.complete);
    }
}

#[test]
fn witnesses_are_in_json_and_sarif_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture = root.join("tests/fixtures/err/7031_w0303_refusal_reasons.ctxpack");
    let out = Command::cargo_bin("ctxpack")
        .unwrap()
        .args(["check", "--format", "json"])
        .arg(&fixture)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &json["diagnostics"][0];
    assert_eq!(d["code"], "W0303");
    assert_eq!(
        d["witness"],
        json!({"request": {"context": {"flags": ["fraud"], "user": {"age": 17}}}})
    );
    let out = Command::cargo_bin("ctxpack")
        .unwrap()
        .args(["check", "--format", "sarif"])
        .arg(&fixture)
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(result["properties"]["witness"], d["witness"]);
    // The witness sits in a property bag: the log stays valid SARIF 2.1.0.
    let schema_id =
        "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";
    let text = std::fs::read(root.join("tests/data/sarif/sarif-schema-2.1.0.json")).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.enable_format_assertions();
    compiler
        .add_resource(schema_id, serde_json::from_slice(&text).unwrap())
        .unwrap();
    let index = compiler.compile(schema_id, &mut schemas).unwrap();
    if let Err(e) = schemas.validate(&sarif, index) {
        panic!("{e:#}\n{sarif:#}");
    }
    // Diagnostics without a witness keep their shape.
    let plain = root.join("tests/fixtures/err/6211_w0401_two_unpermitted_tools.ctxpack");
    let out = Command::cargo_bin("ctxpack")
        .unwrap()
        .args(["check", "--format", "json"])
        .arg(&plain)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["diagnostics"][0].get("witness").is_none());
}

// ── explain --tools ──────────────────────────────────────────────────────────────

fn ctxpack() -> Command {
    Command::cargo_bin("ctxpack").unwrap()
}

#[test]
fn explain_tools_shows_every_intent_and_mode() {
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("packs/support/support.ctxpack");
    let out = ctxpack()
        .args(["explain", "--tools"])
        .arg(&support)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("intent refund (safety supervised)"), "{text}");
    assert!(text.contains("withheld: approval confirm"), "{text}");
    assert!(text.contains("issue_refund in supervised: withheld when `chargeback_hold` fires"));
    assert!(text.contains("ctx.flags = [\"chargeback\"]"), "{text}");

    let out = ctxpack()
        .args(["explain", "--format", "json", "--tools"])
        .arg(&support)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["pack"], "acme/support-agent@1.4.0");
    assert_eq!(json["complete"], true);
    let refund = json["intents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["intent"] == "refund")
        .unwrap();
    let supervised = &refund["modes"][1];
    assert_eq!(supervised["mode"], "supervised");
    let issue = supervised["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "issue_refund")
        .unwrap();
    assert_eq!(issue["status"], "conditional");
    assert_eq!(issue["policies"], json!(["chargeback_hold"]));
    assert_eq!(
        issue["witness_withheld"]["request"]["context"]["flags"],
        json!(["chargeback"])
    );
    let autonomous = &refund["modes"][0]["tools"];
    let issue = autonomous
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "issue_refund")
        .unwrap();
    assert_eq!(
        issue,
        &json!({"tool": "issue_refund", "status": "withheld",
                "reason": "approval_exceeds_safety_mode", "approval": "confirm"})
    );
}

#[test]
fn explain_tools_refuses_what_it_cannot_explain() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.ctxpack");
    std::fs::write(
        &broken,
        "pack \"a/b\" version \"1.0.0\"\nintent x { tools nope }\n",
    )
    .unwrap();
    ctxpack()
        .args(["explain", "--tools"])
        .arg(&broken)
        .assert()
        .code(1);
    let library = dir.path().join("lib.ctxpack");
    std::fs::write(&library, "pack \"a/lib\" version \"1.0.0\" library\n").unwrap();
    ctxpack()
        .args(["explain", "--tools"])
        .arg(&library)
        .assert()
        .code(1);
    ctxpack()
        .args(["explain", "--tools"])
        .arg(dir.path().join("missing.ctxpack"))
        .assert()
        .code(3);
    ctxpack()
        .args(["explain", "E0401", "--tools"])
        .arg(&library)
        .assert()
        .code(2);
    // The code pages still work as before.
    ctxpack().args(["explain", "W0303"]).assert().code(0);
}

// ── The bundled packs ────────────────────────────────────────────────────────────

#[test]
fn bundled_packs_are_analysed_completely() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["support", "coding", "triage"] {
        let text =
            std::fs::read_to_string(root.join(format!("packs/{name}/{name}.ctxpack"))).unwrap();
        let checked = ctxpack::check::check_source(&text);
        assert!(!checked.has_errors());
        let table = analysis::tool_table(&checked.pack).unwrap();
        assert!(table.complete, "{name}");
        // Everything the bundled packs' conditions use is in the fragment.
        for row in &table.intents {
            for m in &row.modes {
                for t in &m.tools {
                    assert!(
                        !matches!(t.status, Status::Undetermined { .. } | Status::NotAnalysed),
                        "{name}: {} {} {}: {:?}",
                        row.intent,
                        m.mode.as_str(),
                        t.tool,
                        t.status
                    );
                }
            }
        }
    }
}

/// Raw JsonLogic of shapes the fragment does not take (or takes only in part) is left
/// alone: no panic, no claim.
#[test]
fn odd_raw_conditions_are_left_alone() {
    let conditions = [
        r#"{"!": [true, false]}"#,
        r#"{"var": ["ctx.verified", true]}"#,
        r#"{"in": [{"var": "ctx.country"}, "USA"]}"#,
        r#"{"<": [1, {"var": "ctx.age"}, 10]}"#,
        r#"{"==": [{"var": "ctx.age"}, "18"]}"#,
        r#"{"===": [{"var": "ctx.flags"}, ["vip"]]}"#,
        r#"{"===": [{"var": "ctx.age"}, 1e300]}"#,
        r#"{"!!": {"var": "ctx.tier"}}"#,
        r#"{"===": [{"var": "ctx.age"}, {"var": "ctx.count"}]}"#,
        r#"{"in": [{"var": "ctx.country"}, [{"var": "ctx.note"}]]}"#,
        r#"{"and": [{"var": "ctx.age"}, true]}"#,
        r#"{"==": [{"var": "ctx.total"}, null]}"#,
        r#"{"if": [{"var": "ctx.verified"}, true, false]}"#,
    ];
    for (k, c) in conditions.iter().enumerate() {
        let text = pack_with(&format!(
            "policy odd priority 1 {{\n  when json {c}\n  instruct \"x\"\n}}\n"
        ));
        let checked = ctxpack::check::check_source(&text);
        let found: Vec<&str> = checked
            .diagnostics
            .iter()
            .map(|d| d.code)
            .filter(|c| c.starts_with("W03"))
            .collect();
        assert!(found.is_empty(), "condition {k} `{c}`: {found:?}");
        let _ = analysis::tool_table(&checked.pack);
    }
    // Deep nesting stops the analysis of that condition, not the checker.
    let deep = format!(
        "{}{{\"var\": \"ctx.verified\"}}{}",
        "{\"!\": [".repeat(200),
        "]}".repeat(200)
    );
    let text = pack_with(&format!(
        "policy deep priority 1 {{\n  when json {deep}\n  instruct \"x\"\n}}\n"
    ));
    let _ = ctxpack::check::check_source(&text);
}
