//! Generates a valid pack for the policy analysis: `policies` policies over `fields`
//! context fields of every kind the analysis models, 10 intents and 20 tools, with
//! priorities that tie often (about ten policies per priority) so that refusals
//! shadow and equal-priority policies clash. Deterministic: the same arguments give
//! the same text.

/// A small deterministic generator (an LCG); the benchmark needs no randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

pub fn pack(policies: usize, fields: usize) -> String {
    let mut rng = Rng(0x5eed);
    let mut s = String::with_capacity(policies * 120);
    s.push_str("pack \"bench/analysis\" version \"1.0.0\"\n\ncontext {\n");
    for k in 0..fields {
        let ty = match k % 7 {
            0 => "int",
            1 => "float?",
            2 => "enum(\"a\", \"b\", \"c\", \"d\")",
            3 => "string",
            4 => "bool",
            5 => "list<string>",
            _ => "int?",
        };
        s.push_str(&format!("  f{k}: {ty}\n"));
    }
    s.push_str("}\n\nprompt system \"You are a helpful assistant.\"\n\n");
    s.push_str("budget {\n  total 64_000\n  bucket policy   { share 10% }\n  bucket tools    { share 10% }\n  bucket evidence { share 50% }\n  bucket memory   { share 10% }\n  bucket session  { share 20% }\n}\n\n");
    let approvals = [("low", "auto"), ("high", "confirm"), ("critical", "review")];
    for t in 0..20 {
        let (risk, approval) = approvals[t % 3];
        s.push_str(&format!(
            "tool t{t} {{\n  description \"Tool {t}.\"\n  kind read\n  risk {risk}\n  approval {approval}\n}}\n\n"
        ));
    }
    for i in 0..10 {
        let tools: Vec<String> = (0..4).map(|j| format!("t{}", (i * 2 + j) % 20)).collect();
        let fallback = if i == 0 { " fallback" } else { "" };
        s.push_str(&format!(
            "intent i{i}{fallback} {{\n  safety reviewed\n  tools {}\n  task \"Handle case {i}.\"\n}}\n\n",
            tools.join(", ")
        ));
    }
    let reasons = ["Not allowed.", "Not for minors.", "Region not served."];
    let targets = ["desk-a", "desk-b", "desk-c"];
    for p in 0..policies {
        let kind = rng.below(100);
        // Refusals are narrow, as real ones are: two or three comparisons, one of
        // them an equality, often scoped to an intent.
        let refuses = kind < 8;
        let atoms = if refuses {
            2 + rng.below(2)
        } else {
            1 + rng.below(3)
        };
        let mut parts: Vec<String> = (0..atoms).map(|_| atom(&mut rng, fields)).collect();
        if refuses {
            parts[0] = equality(&mut rng, fields);
        }
        if rng.below(if refuses { 2 } else { 4 }) == 0 {
            parts.push(format!("request.intent == \"i{}\"", rng.below(10)));
        }
        if rng.below(8) == 0 {
            let mode = ["autonomous", "supervised", "reviewed"][rng.below(3) as usize];
            parts.push(format!("run.safety_mode != \"{mode}\""));
        }
        let when = if !refuses && parts.len() > 2 && rng.below(3) == 0 {
            // An alternative: (x and y) or z.
            let last = parts.pop().unwrap_or_default();
            format!("({}) or {last}", parts.join(" and "))
        } else {
            parts.join(" and ")
        };
        let effect = match kind {
            0..=7 => format!("refuse \"{}\"", reasons[rng.below(3) as usize]),
            8..=17 => format!("escalate \"{}\"", targets[rng.below(3) as usize]),
            18..=32 => format!("deny t{}", rng.below(20)),
            33..=47 => format!("require_approval t{}", rng.below(20)),
            _ => format!("instruct \"Note {p}.\""),
        };
        s.push_str(&format!(
            "policy p{p} priority {} {{\n  when {when}\n  {effect}\n}}\n\n",
            rng.below(50)
        ));
    }
    s
}

/// An equality of a random enum, string or list field with a constant.
fn equality(rng: &mut Rng, fields: usize) -> String {
    let k = 7 * rng.below((fields as u64).div_ceil(7)) + [2, 3, 5][rng.below(3) as usize];
    let k = if k as usize >= fields { 2 } else { k };
    match k % 7 {
        2 => format!(
            "ctx.f{k} == \"{}\"",
            ["a", "b", "c", "d"][rng.below(4) as usize]
        ),
        3 => format!("ctx.f{k} == \"s{}\"", rng.below(5)),
        _ => format!("\"t{}\" in ctx.f{k}", rng.below(5)),
    }
}

/// One comparison of a random field with a constant, as the pack's authors write them
/// (optional fields guarded with `exists`).
fn atom(rng: &mut Rng, fields: usize) -> String {
    let k = rng.below(fields as u64);
    let c = rng.below(10) * 10;
    match k % 7 {
        0 => match rng.below(3) {
            0 => format!("ctx.f{k} < {c}"),
            1 => format!("ctx.f{k} >= {c}"),
            _ => format!("ctx.f{k} == {c}"),
        },
        1 => format!("exists(ctx.f{k}) and ctx.f{k} > {c}.5"),
        2 => match rng.below(2) {
            0 => format!(
                "ctx.f{k} == \"{}\"",
                ["a", "b", "c", "d"][rng.below(4) as usize]
            ),
            _ => format!(
                "ctx.f{k} in [\"a\", \"{}\"]",
                ["b", "c", "d"][rng.below(3) as usize]
            ),
        },
        3 => format!("ctx.f{k} == \"s{}\"", rng.below(5)),
        4 => {
            if rng.below(2) == 0 {
                format!("ctx.f{k}")
            } else {
                format!("not ctx.f{k}")
            }
        }
        5 => format!("\"t{}\" in ctx.f{k}", rng.below(5)),
        _ => format!("exists(ctx.f{k}) and ctx.f{k} <= {c}"),
    }
}
