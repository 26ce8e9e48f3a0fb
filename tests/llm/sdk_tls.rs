//! The README's "point your app's SDK at tearline", as users run it: `tearline proxy
//! --upstream-tls` in front of an HTTPS model endpoint (the lab with `--tls-self-signed`,
//! trusted through `--upstream-ca`), every SDK given the proxy's plain-HTTP base URL and a
//! planted API key. The OpenAI-API clients get complete answers over the proxy's TLS leg; the
//! Anthropic-API streams are cut (a profile scoped to `/v1/messages`), so the proxy has cuts
//! and findings to write — and no output of either process (stdout, stderr at `-vv`, the cuts
//! and findings logs, every file in the run's folder) contains either planted key.

use std::path::Path;

use crate::support::drivers::{Api, Job, Mode, clients, run_jobs_with_env};
use crate::support::procs::{after, spawn, terminate, wait_line};

/// Every file under `dir`, read as text (lossy).
fn files_text(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)
            .expect("read the run folder")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                out.push((
                    p.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdks_through_upstream_tls_get_answers_and_no_output_holds_their_keys() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let p = |x: &Path| x.to_str().expect("utf-8 temp path").to_owned();
    let ca_dir = dir.path().join("ca");
    let lab = spawn(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tls-self-signed",
        "--tls-ca-dir",
        &p(&ca_dir),
    ]);
    let ca = after(
        &wait_line(&lab.out, "TLS: trust the tearline local CA "),
        "local CA ",
        ' ',
    )
    .to_owned();
    let lab_addr = after(&wait_line(&lab.err, "lab server listening"), "addr=", ' ').to_owned();
    let lab_port = lab_addr.rsplit(':').next().expect("a port").to_owned();
    let profile = dir.path().join("cut-messages.toml");
    std::fs::write(
        &profile,
        "[[fault]]\nname = \"cut\"\nkind = \"sse_cut\"\ndirection = \"downstream\"\n\
         at = \"mid-value\"\naction = \"clean-end\"\npath = \"/v1/messages\"\n",
    )
    .expect("write the profile");
    let (cuts, findings) = (
        dir.path().join("cuts.jsonl"),
        dir.path().join("findings.jsonl"),
    );
    let upstream = format!("localhost:{lab_port}");
    let mut proxy = spawn(&[
        "proxy",
        "-vv",
        "--api",
        "off",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &upstream,
        "--upstream-tls",
        "--upstream-ca",
        &ca,
        "--profile",
        &p(&profile),
        "--cuts-log",
        &p(&cuts),
        "--findings-log",
        &p(&findings),
    ]);
    let listen = after(
        &wait_line(&proxy.out, " listening on "),
        " listening on ",
        ' ',
    )
    .to_owned();

    // Keys nobody could guess, so a match can only be a leak.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let openai_key = format!("sk-planted-openai-{nonce:x}");
    let anthropic_key = format!("sk-ant-planted-{nonce:x}");
    let mut jobs = Vec::new();
    for client in clients() {
        for mode in Mode::ALL {
            jobs.push(Job {
                id: jobs.len(),
                base: format!("http://{listen}"),
                client,
                mode,
                timeout_ms: 20_000,
                deadline_ms: 40_000,
                h2: false,
            });
        }
    }
    let env = [
        ("OPENAI_API_KEY", openai_key.as_str()),
        ("ANTHROPIC_API_KEY", anthropic_key.as_str()),
    ];
    let out = run_jobs_with_env(&jobs, 6, &env).await;
    for j in &jobs {
        let o = &out[&j.id];
        if j.client.api != Api::Messages {
            let done = o.raised.is_none() && !o.hung && o.finish.is_some();
            assert!(
                done,
                "{:?} {:?} through upstream TLS: {o:?}",
                j.client, j.mode
            );
            match j.mode {
                Mode::Text => assert!(!o.text.is_empty(), "{o:?}"),
                Mode::Tool => assert!(o.tool.as_ref().is_some_and(|t| t.parsed), "{o:?}"),
            }
        }
    }
    terminate(&mut proxy);
    let lab_all = lab.all.lock().expect("log").clone();
    drop(lab);
    let cut_lines = std::fs::read_to_string(&cuts).unwrap_or_default();
    let messages_runs = jobs
        .iter()
        .filter(|j| j.client.api == Api::Messages)
        .count();
    assert!(
        cut_lines.lines().count() >= messages_runs,
        "every Messages stream is cut: {cut_lines}"
    );
    let mut outputs = files_text(dir.path());
    outputs.push((
        "proxy stdout+stderr".into(),
        proxy.all.lock().expect("log").clone(),
    ));
    outputs.push(("lab stdout+stderr".into(), lab_all));
    for (name, text) in &outputs {
        for key in [&openai_key, &anthropic_key] {
            assert!(
                !text.contains(key.as_str()),
                "{name} holds a planted API key"
            );
        }
    }
}
