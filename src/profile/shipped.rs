//! The shipped profiles, built into the binary: `tearline profiles list` and `profiles show`
//! work from any directory, and `replay` runs the same text a checkout's `profiles/` holds.
//!
//! Invariant: [`SHIPPED`] names every `profiles/*.toml` of the source tree, in name order (a
//! unit test compares it with the directory, so a new profile file fails the build's tests
//! until it is listed here).

/// `(name, TOML text)` of every shipped profile, sorted by name.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "flaky-mobile",
        include_str!("../../profiles/flaky-mobile.toml"),
    ),
    ("flaky-wifi", include_str!("../../profiles/flaky-wifi.toml")),
    (
        "gateway-idle-kill",
        include_str!("../../profiles/gateway-idle-kill.toml"),
    ),
    (
        "h2-flow-stall",
        include_str!("../../profiles/h2-flow-stall.toml"),
    ),
    ("h2-goaway", include_str!("../../profiles/h2-goaway.toml")),
    (
        "h2-hold-headers",
        include_str!("../../profiles/h2-hold-headers.toml"),
    ),
    (
        "h2-refuse-streams",
        include_str!("../../profiles/h2-refuse-streams.toml"),
    ),
    (
        "latency-jitter",
        include_str!("../../profiles/latency-jitter.toml"),
    ),
    (
        "llm-missing-done",
        include_str!("../../profiles/llm-missing-done.toml"),
    ),
    ("llm-stall", include_str!("../../profiles/llm-stall.toml")),
    (
        "llm-tool-args",
        include_str!("../../profiles/llm-tool-args.toml"),
    ),
    (
        "llm-truncation",
        include_str!("../../profiles/llm-truncation.toml"),
    ),
    (
        "proxy-buffering",
        include_str!("../../profiles/proxy-buffering.toml"),
    ),
    (
        "reset-250ms",
        include_str!("../../profiles/reset-250ms.toml"),
    ),
    (
        "rolling-deploy",
        include_str!("../../profiles/rolling-deploy.toml"),
    ),
    (
        "slow-consumer",
        include_str!("../../profiles/slow-consumer.toml"),
    ),
];

/// The text of the shipped profile `name` (with or without `.toml`).
pub fn text(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".toml").unwrap_or(name);
    SHIPPED.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The shipped profiles' names, comma-separated (for error messages).
pub fn names() -> String {
    SHIPPED
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_file_of_the_tree_is_built_in_with_its_text() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles");
        let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
            .expect("profiles/")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .map(|p| {
                let name = p.file_stem().map(|s| s.to_string_lossy().into_owned());
                (
                    name.unwrap_or_default(),
                    std::fs::read_to_string(&p).unwrap_or_default(),
                )
            })
            .collect();
        files.sort();
        let built: Vec<(String, String)> = SHIPPED
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect();
        assert_eq!(built, files);
        assert!(text("reset-250ms.toml").is_some() && text("nope").is_none());
    }

    #[test]
    fn every_shipped_profile_is_valid() {
        for (name, text) in SHIPPED {
            let p = crate::profile::parse(text, name);
            assert!(p.is_ok(), "{name}: {:?}", p.err());
        }
    }
}
