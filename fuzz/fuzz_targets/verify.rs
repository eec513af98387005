//! `verify_bytes` on arbitrary bytes: never a panic; an accepted artifact's canonical
//! bytes verify again to the same artifact.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(artifact) = ctxpack::artifact::verify_bytes(data) {
        let bytes = artifact.canonical_bytes();
        let again = ctxpack::artifact::verify_bytes(&bytes).expect("canonical bytes verify");
        assert_eq!(again.canonical_bytes(), bytes);
    }
});
