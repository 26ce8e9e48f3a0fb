//! The command lines README.md and the `--help` texts show, as a user would copy them: the
//! extraction the tests that parse them (`src/cli_examples.rs`) and run them
//! (`tests/cli_examples/`) share, so both see exactly the same lines.
//!
//! What is extracted: README lines starting with `tearline ` inside fenced code blocks and
//! inline code spans (synopses too: optional `[…]` groups are tried one at a time, `a\|b`
//! alternatives each, placeholders such as `N`, `FILE`, `EXPR` replaced by a value of their
//! kind); in a help text, the lines after `Examples:` that start with `tearline ` or
//! `--fail-on` (the latter appended to `tearline report show report.json`). A help line ending
//! in `&` starts a server the next example line uses: it is kept with that line.
//! Invariant: pure text in, text out (no I/O), lines joined where they end in `\`.

/// One command line to run, where it was found, and the servers started before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// `README.md`, or the command whose `--help` shows it (`tearline load`).
    pub source: String,
    /// Lines ending in `&` just before it: servers it talks to, started first.
    pub started: Vec<String>,
    /// The command line, as shown (comments included).
    pub line: String,
}

/// Splits one shell command line into words: single and double quotes, backslash escapes, an
/// unquoted `#` word ends the line, `&` and redirections (`> file`) are dropped.
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                cur.push(n);
                            }
                        }
                        _ => cur.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    let mut out = Vec::new();
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        match w.as_str() {
            "&" => {}
            ">" | ">>" | "2>" => skip_next = true,
            _ if w.starts_with('>') => {}
            _ => out.push(w),
        }
    }
    out
}

/// Joins lines ending in `\` with the next one.
fn join_continued(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim_end();
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
        } else {
            cur.push_str(t);
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Placeholders of the README's synopses, with a value of their kind: `(flag before it or "",
/// placeholder, value)`; the first row whose flag matches (or is "") wins.
const PLACEHOLDERS: [(&str, &str, &str); 11] = [
    ("", "N", "1"),
    ("", "R", "10"),
    ("", "EXPR", "'silent-loss>0'"),
    ("--api", "HOST:PORT", "127.0.0.1:8474"),
    ("", "HOST:PORT", "127.0.0.1:8080"),
    ("--populate", "FILE", "toxiproxy.json"),
    ("", "FILE", "profiles/reset-250ms.toml"),
    ("", "DIR", "out"),
    ("", "NAME", "reset-250ms"),
    ("", "…", ""),
    ("", "...", ""),
];

fn fill(line: &str) -> String {
    let mut before = "";
    line.split(' ')
        .map(|w| {
            let out = PLACEHOLDERS
                .iter()
                .find(|(flag, p, _)| *p == w && (flag.is_empty() || *flag == before))
                .map_or(w, |(_, _, v)| *v);
            before = w;
            out
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The concrete command lines of a synopsis: the base without optional groups, then the base
/// with each group (nested brackets flattened), each `\|` alternative on its own (an
/// alternative without a flag replaces the value of the first one).
pub fn expand(synopsis: &str) -> Vec<String> {
    let mut base = String::new();
    let mut groups = Vec::new();
    let mut depth = 0usize;
    let mut group = String::new();
    for c in synopsis.chars() {
        match c {
            '[' => {
                depth += 1;
            }
            ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    groups.push(std::mem::take(&mut group));
                }
            }
            c if depth > 0 => group.push(c),
            c => base.push(c),
        }
    }
    let alternatives = |text: &str| -> Vec<String> {
        let parts: Vec<&str> = text.split("\\|").map(str::trim).collect();
        let first = parts.first().copied().unwrap_or("");
        parts
            .iter()
            .map(|p| {
                if p.starts_with('-') || *p == first {
                    (*p).to_owned()
                } else {
                    let mut words: Vec<&str> = first.split(' ').collect();
                    words.pop();
                    words.push(p);
                    words.join(" ")
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for b in alternatives(base.trim()) {
        out.push(fill(&b));
        for g in &groups {
            for a in alternatives(g) {
                out.push(fill(&format!("{b} {a}")));
            }
        }
    }
    out
}

/// Every command line of README.md (its text).
pub fn readme_examples(readme: &str) -> Vec<Example> {
    let mut lines = Vec::new();
    let mut fenced = String::new();
    let mut in_fence = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            fenced.push_str(line);
            fenced.push('\n');
            continue;
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("tearline ") {
                lines.extend(expand(span));
            }
        }
    }
    for l in join_continued(&fenced) {
        if l.trim_start().starts_with("tearline ") {
            lines.push(l.trim().to_owned());
        }
    }
    lines
        .into_iter()
        .map(|line| Example {
            source: "README.md".to_owned(),
            started: Vec::new(),
            line,
        })
        .collect()
}

/// The example lines of one command's long help text (`source`: the command, `tearline load`).
pub fn help_examples(source: &str, help: &str) -> Vec<Example> {
    let Some((_, examples)) = help.split_once("Examples:") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut started = Vec::new();
    for l in join_continued(examples) {
        let t = l.trim();
        let line = if t.starts_with("tearline ") {
            t.to_owned()
        } else if t.starts_with("--fail-on") {
            format!("tearline report show report.json {t}")
        } else {
            continue;
        };
        if line.ends_with('&') {
            started.push(line);
            continue;
        }
        out.push(Example {
            source: source.to_owned(),
            started: std::mem::take(&mut started),
            line,
        });
    }
    out
}
