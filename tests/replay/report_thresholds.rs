//! `--fail-on` thresholds: the documented forms parse, malformed ones fail with a column and
//! what was expected, and evaluation reads the right numbers of a report.

use crate::common;
use tearline::report::thresholds::{Metric, Op, Stat, Threshold, ThresholdError, exit_code};

fn parse(s: &str) -> Threshold {
    s.parse()
        .unwrap_or_else(|e| panic!("`{s}` should parse: {e}"))
}

fn reject(s: &str) -> ThresholdError {
    match s.parse::<Threshold>() {
        Ok(t) => panic!("`{s}` should be rejected, parsed as {t:?}"),
        Err(e) => e,
    }
}

fn syntax_column(e: &ThresholdError) -> (usize, String) {
    match e {
        ThresholdError::Syntax {
            column, expected, ..
        } => (*column, expected.clone()),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn documented_forms_parse_to_metric_operator_and_value() {
    let t = parse("silent-loss>0");
    assert_eq!(
        t.metric,
        Metric::Count {
            scope: None,
            name: "silent-loss".into()
        }
    );
    assert_eq!((t.op, t.value), (Op::Gt, 0.0));

    let t = parse("p99(call)>2s");
    assert_eq!(
        t.metric,
        Metric::Latency {
            stat: Stat::Percentile(99.0),
            histogram: "call".into()
        }
    );
    assert_eq!((t.op, t.value), (Op::Gt, 2_000_000.0));

    let t = parse("torn-cut>=1");
    assert_eq!((t.op, t.value), (Op::Ge, 1.0));

    let t = parse(" naive.silent-loss != 0 ");
    assert_eq!(
        t.metric,
        Metric::Count {
            scope: Some("naive".into()),
            name: "silent-loss".into()
        }
    );
    assert_eq!(t.op, Op::Ne);
    assert_eq!(t.expr, "naive.silent-loss != 0");

    let t = parse("p99.9(strict.call)>=500ms");
    assert_eq!(
        t.metric,
        Metric::Latency {
            stat: Stat::Percentile(99.9),
            histogram: "strict.call".into()
        }
    );
    assert_eq!(t.value, 500_000.0);

    assert_eq!(
        parse("max( proxy.client-reconnect ) < 1.5 s").value,
        1_500_000.0
    );
    assert_eq!(parse("mean(call)<=250us").op, Op::Le);
    assert_eq!(parse("min(call)==250µs").op, Op::Eq);
    for form in [
        "cuts==48",
        "cut.mid-value>0",
        "cut.reset>0",
        "finding.fresh-stream>0",
        "cut.mid-delta>0",
        "cut.mid-tool-args==0",
        "cut.before-completion>0",
    ] {
        parse(form);
    }
}

#[test]
fn malformed_thresholds_report_the_column_and_what_was_expected() {
    let (col, expected) = syntax_column(&reject("p99(call"));
    assert_eq!((col, expected.as_str()), (9, "`)`"));

    let (col, expected) = syntax_column(&reject("silent-loss>>0"));
    assert_eq!(col, 13);
    assert!(expected.contains("number"), "{expected}");

    let (col, expected) = syntax_column(&reject("silent-loss=0"));
    assert_eq!(col, 12);
    assert!(
        expected.contains(">=") && expected.contains("!="),
        "{expected}"
    );

    let (col, expected) = syntax_column(&reject("p99(call)>2"));
    assert_eq!(col, 12);
    assert!(expected.contains("us, ms or s"), "{expected}");

    let (col, expected) = syntax_column(&reject("silent-loss>0ms"));
    assert_eq!(col, 14);
    assert!(expected.contains("no unit"), "{expected}");

    let (col, expected) = syntax_column(&reject("p101(call)>1s"));
    assert_eq!(col, 1);
    assert!(expected.contains("pNN"), "{expected}");

    let (col, _) = syntax_column(&reject(""));
    assert_eq!(col, 1);

    let (col, expected) = syntax_column(&reject("silent-loss>0 or more"));
    assert_eq!(col, 15);
    assert!(expected.starts_with("end of input"), "{expected}");
    let (col, expected) = syntax_column(&reject("p99(call)>1s later"));
    assert_eq!((col, expected.as_str()), (14, "end of input"));

    let message = reject("p99(call").to_string();
    assert_eq!(
        message,
        "threshold `p99(call`, column 9: expected `)`, found end of input"
    );
}

#[test]
fn unknown_metric_names_list_the_known_ones() {
    for (expr, name, known) in [
        ("silent-los>0", "silent-los", "silent-loss"),
        ("naive.bogus>0", "naive.bogus", "torn-cut"),
        ("cut.sideways>0", "cut.sideways", "mid-value"),
        ("cut.mid-deltas>0", "cut.mid-deltas", "mid-delta"),
        ("finding.torn>0", "finding.torn", "torn-cut"),
    ] {
        match reject(expr) {
            ThresholdError::UnknownMetric {
                column,
                name: got,
                known: list,
                ..
            } => {
                assert_eq!(column, 1, "{expr}");
                assert_eq!(got, name, "{expr}");
                assert!(list.contains(known), "{expr}: {list}");
            }
            other => panic!("{expr}: expected unknown metric, got {other:?}"),
        }
    }
}

#[test]
fn evaluation_reads_counters_findings_cuts_and_percentiles() {
    let report = common::report::report(1);
    let check = |expr: &str| {
        parse(expr)
            .evaluate(&report)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
    };
    let v = check("naive.silent-loss>0");
    assert!(v.failed);
    assert_eq!(v.actual, 12.0);
    assert!(!check("strict.silent-loss>0").failed);
    assert_eq!(check("silent-loss>0").actual, 12.0, "summed over policies");
    assert_eq!(check("calls>0").actual, 200.0);
    assert_eq!(check("torn-cut>=1").actual, 48.0);
    assert_eq!(check("finding.cursor-ahead>0").actual, 12.0);
    assert_eq!(
        check("replay-gap>0").actual,
        0.0,
        "a known kind without findings is 0"
    );
    assert_eq!(check("cuts>0").actual, 48.0);
    assert_eq!(check("cut.mid-value>0").actual, 40.0);
    assert_eq!(check("cut.reset>0").actual, 47.0);
    assert_eq!(
        check("cut.mid-delta>0").actual,
        0.0,
        "an LLM position without cuts is 0"
    );

    let strict = &report.policies["strict"].histograms["call"].histogram;
    let naive = &report.policies["naive"].histograms["call"].histogram;
    let v = check("p99(strict.call)>2s");
    assert_eq!(v.actual, strict.value_at_quantile(0.99) as f64);
    assert!(v.failed, "the synthetic tail is above 2 s");
    let mut both = strict.clone();
    both.add(naive).expect("adds");
    assert_eq!(
        check("p50(call)>2s").actual,
        both.value_at_quantile(0.5) as f64,
        "an unqualified name merges the policies"
    );
    assert!(!check("p50(call)>2s").failed);
    assert_eq!(check("max(client-reconnect)>1s").actual, {
        let h = &report.proxy_histograms["client-reconnect"].histogram;
        h.max() as f64
    });
    assert_eq!(
        check("p99(proxy.server-replay)>0us").actual,
        0.0,
        "empty is 0"
    );

    let verdicts = vec![check("strict.silent-loss>0")];
    assert_eq!(exit_code(&verdicts), 0);
    let verdicts = vec![check("strict.silent-loss>0"), check("naive.silent-loss>0")];
    assert_eq!(exit_code(&verdicts), 99);
}

#[test]
fn unproven_resend_is_a_threshold_of_its_own_apart_from_abandoned() {
    let mut report = common::report::report(1);
    let check = |r: &tearline::report::Report, expr: &str| {
        parse(expr)
            .evaluate(r)
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
    };
    let before = check(&report, "finding.abandoned>0").actual;
    assert!(!check(&report, "finding.unproven-resend>0").failed);
    report.add_finding(
        "unproven-resend",
        tearline::report::FindingExample {
            session: "s1".into(),
            ..Default::default()
        },
    );
    let v = check(&report, "finding.unproven-resend>0");
    assert!(v.failed);
    assert_eq!(v.actual, 1.0);
    assert_eq!(check(&report, "unproven-resend>0").actual, 1.0);
    assert_eq!(
        check(&report, "finding.abandoned>0").actual,
        before,
        "counted apart from abandoned"
    );
}

#[test]
fn names_missing_from_the_report_are_errors_listing_what_it_has() {
    let report = common::report::report(1);
    match parse("lazy.calls>0").evaluate(&report) {
        Err(ThresholdError::UnknownPolicy { policy, known, .. }) => {
            assert_eq!(policy, "lazy");
            assert_eq!(known, "naive, strict");
        }
        other => panic!("expected unknown policy, got {other:?}"),
    }
    match parse("p99(nope)>1s").evaluate(&report) {
        Err(ThresholdError::UnknownHistogram { name, known, .. }) => {
            assert_eq!(name, "nope");
            assert!(known.contains("strict.call") && known.contains("proxy.client-reconnect"));
        }
        other => panic!("expected unknown histogram, got {other:?}"),
    }
}
