//! Generates large, valid packs for benchmarks: `lines` lines of tools, intents and
//! policies in the proportions of a real pack.

pub fn pack(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 40);
    s.push_str("pack \"bench/large\" version \"1.0.0\"\n\n");
    s.push_str("context {\n  user.tier: enum(\"free\", \"pro\", \"enterprise\")\n  user.age: int\n  order.total: float?\n  flags: list<string>\n}\n\n");
    s.push_str("prompt system \"\"\"\n  You are a helpful assistant. Reply in {{ request.locale }}.\n\"\"\"\n\n");
    s.push_str("budget {\n  total 128_000\n  tokenizer approx\n  bucket policy   { share 10% priority 90 }\n  bucket tools    { share 10% priority 80 }\n  bucket business { share 10% priority 70 }\n  bucket evidence { share 45% priority 50 overflow truncate }\n  bucket memory   { share 10% priority 40 }\n  bucket session  { share 15% priority 30 }\n}\n\n");
    let mut i = 0;
    while s.lines().count() < lines {
        // One unit is ~40 lines: 3 tools, 1 intent, 2 policies, 1 block.
        for t in 0..3 {
            s.push_str(&format!(
                "/// Tool {i}-{t}.\ntool t{i}_{t} {{\n  description \"Does thing {t} of group {i}.\"\n  kind read\n  risk low\n  approval auto\n  input {{\n    id: string\n    count: int?\n  }}\n}}\n\n"
            ));
        }
        s.push_str(&format!(
            "intent i{i} {{\n  description \"Group {i}.\"\n  safety supervised\n  tools t{i}_0, t{i}_1, t{i}_2\n  task \"\"\"\n    Handle group {i} for {{{{ ctx.user.tier }}}}.\n  \"\"\"\n}}\n\n"
        ));
        s.push_str(&format!(
            "policy p{i}_a priority {p} {{\n  when ctx.user.age < 18 and request.intent == \"i{i}\"\n  refuse \"Not for minors.\"\n}}\n\n",
            p = i % 100
        ));
        s.push_str(&format!(
            "policy p{i}_b {{\n  when exists(ctx.order.total) and ctx.order.total > 500.0 and \"vip\" in ctx.flags\n  require_approval t{i}_0\n  instruct \"Large order in group {i}.\"\n}}\n\n"
        ));
        s.push_str(&format!(
            "block b{i} in business priority 10 \"\"\"\n  Rules for group {i}.\n\"\"\"\n\n"
        ));
        i += 1;
    }
    s
}
