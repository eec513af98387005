//! The compiler's BPE counts are tiktoken's: on every text of the reference workload,
//! on texts chosen to break tokenizers, and on random texts built from the characters
//! that pre-tokenizers treat specially.

use ctxpack::tokens::{count, Tokenizer};
use proptest::prelude::*;

fn reference(kind: Tokenizer) -> &'static tiktoken_rs::CoreBPE {
    match kind {
        Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        _ => tiktoken_rs::o200k_base_singleton(),
    }
}

fn workload_texts() -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/data/workload.json");
    let w: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("the workload is in the repository"))
            .expect("the workload is JSON");
    let mut out = Vec::new();
    fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            serde_json::Value::Object(m) => m.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    strings(&w, &mut out);
    out
}

fn adversarial() -> Vec<String> {
    let mut out: Vec<String> = [
        "<|endoftext|>",
        "<|endoftext|> and <|fim_prefix|><|im_start|>system<|im_end|>",
        "Ünïcödé   \t\t  mixed\r\n\r\n  whitespace",
        "don't WON'T it's They'RE we'Ll I'M",
        "tabs\t\t\tand\u{a0}nbsp and\u{2028}separators",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math 𝟙𝟚𝟛",
        "a\u{0}b\u{1}c",
        "   leading and trailing   ",
        "x\u{200b}\u{200b}\u{200d}y",
        "",
        " ",
        "\n",
    ]
    .map(String::from)
    .to_vec();
    out.extend([
        "a".repeat(10_000),
        " ".repeat(5_000),
        "\n".repeat(3_000),
        "^".repeat(20_000),
        "1234567890".repeat(500),
        "日本語のテキストと中文文本、한국어 텍스트".repeat(200),
        "😀👍🏽👩‍👩‍👧‍👦🇫🇷🏳️‍🌈".repeat(300),
        "e\u{301}".repeat(500),
        " \n".repeat(1000),
        "ab ".repeat(3000) + "   \n\n  ",
        "http://example.com/a/b?c=d&e=f#g ".repeat(100),
        "{\"json\": [1, 2.5e10, null, \"x\\ny\"]}".repeat(100),
    ]);
    out
}

#[test]
fn counts_match_tiktoken_on_the_workload_and_adversarial_texts() {
    for kind in [Tokenizer::O200k, Tokenizer::Cl100k] {
        let bpe = reference(kind);
        let mut texts = workload_texts();
        texts.extend(adversarial());
        assert!(texts.len() > 400);
        for text in &texts {
            assert_eq!(
                count(kind, text),
                bpe.encode_ordinary(text).len(),
                "{kind:?} on {:?}",
                text.chars().take(60).collect::<String>()
            );
        }
    }
}

/// Characters the pre-tokenizers treat specially, to build random texts from.
fn tricky_char() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        'a', 'Z', 'é', 'ß', 'ǅ', '\'', 's', 't', 'L', ' ', ' ', '\t', '\n', '\r', '\u{a0}',
        '\u{2028}', '\u{3000}', '0', '7', '٣', '.', ',', '/', '!', '$', '日', '本', '한', '😀',
        '\u{301}', '\u{200d}', '\u{fe0f}', '🏽', 'ー', 'ـ',
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn counts_match_tiktoken_on_random_texts(chars in prop::collection::vec(tricky_char(), 0..80)) {
        let text: String = chars.into_iter().collect();
        for kind in [Tokenizer::O200k, Tokenizer::Cl100k] {
            prop_assert_eq!(count(kind, &text), reference(kind).encode_ordinary(&text).len());
        }
    }
}
