//! Every command line the README and the `--help` texts show is parsed by the real parser
//! ([`Cli::try_parse_from`]), so a renamed or removed flag (or a `--fail-on` that does not
//! parse, or names what a replay does not report) fails here in milliseconds; the same lines
//! (extracted by [`text`]) are RUN as written by `tests/cli_examples/`.

use clap::{CommandFactory, Parser};

use super::Cli;

// Test-only like this whole module (the layer check reads this attribute pair).
#[cfg(test)]
#[path = "cli_examples_text.rs"]
mod text;

use text::{Example, expand, help_examples, readme_examples, shell_words};

fn readme() -> Vec<Example> {
    readme_examples(include_str!("../README.md"))
}

/// Every example of every command's long help.
fn helps() -> Vec<Example> {
    fn walk(cmd: &mut clap::Command, path: String, out: &mut Vec<Example>) {
        let help = cmd.render_long_help().to_string();
        out.extend(help_examples(&path, &help));
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect();
        for name in names {
            if let Some(sub) = cmd.find_subcommand_mut(&name) {
                walk(sub, format!("{path} {name}"), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&mut Cli::command(), "tearline".to_owned(), &mut out);
    out
}

/// Every line: the examples' own and the servers they start.
fn all_lines() -> Vec<(String, String)> {
    readme()
        .into_iter()
        .chain(helps())
        .flat_map(|e| {
            let source = e.source.clone();
            e.started
                .into_iter()
                .chain([e.line])
                .map(move |l| (source.clone(), l))
        })
        .collect()
}

fn parse(line: &str) -> Result<Cli, String> {
    // The README's agents loop over `K` (`--segment $K/4`): one of its values.
    let line = &line.replace("$K", "1");
    Cli::try_parse_from(shell_words(line)).map_err(|e| format!("`{line}`:\n{e}"))
}

#[test]
fn every_readme_command_line_parses() {
    let lines = readme();
    assert!(
        lines.len() >= 20,
        "too few README commands found: {lines:?}"
    );
    let bad: Vec<String> = lines.iter().filter_map(|e| parse(&e.line).err()).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_help_example_parses() {
    let lines = all_lines();
    for sub in [
        "proxy",
        "serve",
        "load",
        "replay",
        "report show",
        "profiles",
    ] {
        assert!(
            lines.iter().any(|(p, _)| p == &format!("tearline {sub}")),
            "no example found in `tearline {sub} --help`"
        );
    }
    let bad: Vec<String> = lines
        .iter()
        .filter(|(p, _)| p != "README.md")
        .filter_map(|(p, l)| parse(l).err().map(|e| format!("{p} --help: {e}")))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_changed_flag_or_a_bad_threshold_is_caught() {
    assert!(parse("tearline replay --threshold 'finding.llm-truncated == 0'").is_err());
    assert!(parse("tearline report show r.json --fail-on 'p99(call)>2'").is_err());
    assert!(parse("tearline replay --fail-on 'finding.llm-truncated>0'").is_ok());
    assert_eq!(
        shell_words(r#"tearline load --args '{"a":1}' --x "b \"c\"" # note"#),
        [
            "tearline",
            "load",
            "--args",
            r#"{"a":1}"#,
            "--x",
            r#"b "c""#
        ]
    );
    assert_eq!(
        expand("tearline replay [--seed N] [--sessions 1 --calls 24 \\| --duration 20s]"),
        [
            "tearline replay",
            "tearline replay --seed 1",
            "tearline replay --sessions 1 --calls 24",
            "tearline replay --duration 20s",
        ]
    );
}

#[test]
fn every_documented_fail_on_names_what_a_default_replay_reports() {
    use tearline::load::Policy;
    let replay = tearline::cmd::replay::vocabulary(
        tearline::replay::scenario::Scenario::default(),
        &[Policy::Strict, Policy::Naive],
        1,
    );
    let mut checked = 0;
    for (_, line) in all_lines() {
        let words = shell_words(&line);
        for pair in words.windows(2).filter(|w| w[0] == "--fail-on") {
            let Ok(t) = pair[1].parse::<tearline::report::Threshold>() else {
                panic!("`{line}`: `{}` does not parse", pair[1]);
            };
            if let Err(e) = replay.check(&t) {
                panic!("`{line}`: {e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} documented thresholds found");
    let old: tearline::report::Threshold = "max(proxy.client-reconnect)>1s"
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        replay.check(&old).is_err(),
        "the old example named no replay histogram"
    );
}

#[test]
fn a_server_started_with_ampersand_goes_with_the_next_line() {
    let help = "About.\n\nExamples:\n  # comment\n  tearline serve --auth &\n  tearline load \\\n      --calls 2\n  --fail-on 'x>0'\n";
    let ex = help_examples("tearline load", help);
    assert_eq!(ex.len(), 2, "{ex:?}");
    assert_eq!(ex[0].started, ["tearline serve --auth &"]);
    assert_eq!(
        shell_words(&ex[0].line),
        ["tearline", "load", "--calls", "2"]
    );
    assert!(ex[1].started.is_empty());
    assert_eq!(
        ex[1].line,
        "tearline report show report.json --fail-on 'x>0'"
    );
}

#[test]
fn placeholders_take_a_value_of_their_flags_kind() {
    assert_eq!(
        expand("tearline proxy --api HOST:PORT [--populate FILE] [--profile FILE]"),
        [
            "tearline proxy --api 127.0.0.1:8474",
            "tearline proxy --api 127.0.0.1:8474 --populate toxiproxy.json",
            "tearline proxy --api 127.0.0.1:8474 --profile profiles/reset-250ms.toml",
        ]
    );
}
