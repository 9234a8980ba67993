//! The capture file's tests: round trips, the text it is, and what each error names.

use base64::Engine as _;
use hdrhistogram::{
    Histogram,
    serialization::{Serializer as _, V2DeflateSerializer, V2Serializer},
};

use super::*;
use crate::snapshot::{Counter, Latency, Probe, SeriesKey};
use crate::testdata;

/// The histogram a version 1 tracer kept per series: 1 ns to 1 h, 2 significant figures,
/// longer calls counted at 1 h.
fn v1_histogram(calls: impl IntoIterator<Item = u64>) -> Histogram<u64> {
    const HOUR_NS: u64 = 3_600 * 1_000_000_000;
    let mut h = Histogram::new_with_bounds(1, HOUR_NS, 2).unwrap();
    for ns in calls {
        h.saturating_record(ns.min(HOUR_NS));
    }
    h
}

/// A histogram in base64, as a version 1 file stores it.
fn v1_encoded(h: &Histogram<u64>, deflate: bool) -> String {
    let mut buf = Vec::new();
    if deflate {
        V2DeflateSerializer::new().serialize(h, &mut buf).unwrap();
    } else {
        V2Serializer::new().serialize(h, &mut buf).unwrap();
    }
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// `s` as a version 1 file: the version 2 text with each series' buckets replaced by the
/// version 1 histogram of its calls (`calls[i]` for `s.series`' `i`-th series).
fn as_v1(s: &Snapshot, calls: &[Vec<u64>], deflate: bool) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&to_string(s)).unwrap();
    v["version"] = 1.into();
    let recs = v["series"].as_array_mut().unwrap();
    assert_eq!(recs.len(), calls.len());
    for (rec, calls) in recs.iter_mut().zip(calls) {
        let rec = rec.as_object_mut().unwrap();
        rec.remove("buckets");
        let h = v1_histogram(calls.iter().copied());
        rec.insert("histogram".into(), v1_encoded(&h, deflate).into());
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// Three series of 10 000 log-uniform calls, and one of calls at the edges: at kernel
/// bucket bounds, one below them, under 8 ns, and past the v1 histogram's 1 h.
fn snapshot_and_calls() -> (Snapshot, Vec<Vec<u64>>) {
    let mut s = testdata::empty();
    let mut by_key = std::collections::BTreeMap::new();
    for i in 0..3 {
        let (key, calls) = testdata::many_series_calls(i);
        by_key.insert(key, calls);
    }
    let mut edges = vec![
        0, 1, 7, 8, 9, 1_023, 1_024, 1_151, 1_152, 999_999, 1_000_000,
    ];
    edges.extend([3_600_000_000_000, 7_200_000_000_000, u64::MAX / 4]);
    by_key.insert(SeriesKey::new(Probe::DDelete, 5), edges);
    for (key, calls) in &by_key {
        for &ns in calls {
            s.record(*key, ns);
        }
    }
    (s, by_key.into_values().collect())
}

fn load_err(text: &str) -> String {
    match from_str(text) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// Series as the live source builds them: from kernel buckets, and as the difference
/// of two readings (min and max then bounded by the histogram, not exact calls).
fn kernel_buckets_and_a_difference() -> Snapshot {
    let mut s = testdata::umount_capture();
    let b = |ns| tracer_common::bucket_of(ns);
    let from_kernel = Latency::from_buckets(
        [(b(900), 3), (b(7_000_000), 2), (b(200_000_000_000), 1)],
        214_000_000_000,
        870,
        201_000_000_000,
    );
    s.series
        .insert(SeriesKey::new(Probe::SysUmount, 9), from_kernel);
    let key = SeriesKey::new(Probe::VfsRmdir, testdata::SESSION);
    let mut later = s.clone();
    later.record(key, 123_456);
    later.meta.duration_ns += 1_000;
    later.since(&s)
}

#[test]
fn rich_snapshots_round_trip_exactly() {
    for s in [
        testdata::umount_capture(),
        testdata::model_run(),
        testdata::empty(),
        testdata::many_series(30),
        kernel_buckets_and_a_difference(),
        testdata::slow_rmdir_capture(),
        testdata::named_cgroups(),
    ] {
        let text = to_string(&s);
        let back = from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, s);
        // And a second trip writes the same bytes.
        assert_eq!(to_string(&back), text);
    }
}

#[test]
fn the_file_says_what_it_is_and_keys_are_strings() {
    let text = to_string(&testdata::umount_capture());
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], "tracer-capture");
    assert_eq!(v["version"], VERSION);
    assert_eq!(v["meta"]["source"], "kernel");
    assert_eq!(v["command"]["exit_code"], 0);
    let srcu = v["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["probe"] == "synchronize_srcu" && r["caller"] == "unregister_shrinker")
        .unwrap();
    assert_eq!(srcu["count"], 300);
    // Each bucket is named by its lower bound, and they hold every call.
    let buckets = srcu["buckets"].as_array().unwrap();
    let lows: Vec<u64> = buckets.iter().map(|b| b[0].as_u64().unwrap()).collect();
    assert!(lows.windows(2).all(|w| w[0] < w[1]), "{lows:?}");
    for lo in &lows {
        assert_eq!(
            tracer_common::bucket_bounds(tracer_common::bucket_of(*lo)).0,
            *lo
        );
    }
    let calls: u64 = buckets.iter().map(|b| b[1].as_u64().unwrap()).sum();
    assert_eq!(calls, 300);
    assert_eq!(v["probes"][0]["attach"]["state"], "attached");
    assert_eq!(v["probes"][0]["attach"]["method"], "fentry");
    // The gone-cgroup id survives as an exact integer.
    assert!(
        v["series"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["cgroup"] == u64::MAX)
    );
}

#[test]
fn cgroup_records_carry_the_names_known_and_no_others() {
    let text = to_string(&testdata::named_cgroups());
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rec = |id: u64| {
        v["cgroups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone()
    };
    let pod = rec(testdata::POD_CONTAINER);
    assert_eq!(
        [
            &pod["namespace"],
            &pod["pod"],
            &pod["container"],
            &pod["runtime"],
            &pod["qos"]
        ],
        ["shop", "cart-7d9f", "cart", "containerd", "Burstable"]
    );
    assert_eq!(pod["pod_uid"], "1b2c3d4e-5f60-4718-89a0-b1c2d3e4f506");
    assert!(pod.get("unit").is_none(), "{pod}");
    assert_eq!(rec(503)["unit"], "cron.service");
    // A plain cgroup's record is what version 2 wrote: id and path.
    let plain = rec(testdata::PLAIN);
    assert_eq!(plain.as_object().unwrap().len(), 2, "{plain}");
    // And a version 2 file, without names, loads with none.
    let mut old = v.clone();
    old["version"] = 2.into();
    for r in old["cgroups"].as_array_mut().unwrap() {
        r.as_object_mut()
            .unwrap()
            .retain(|k, _| k == "id" || k == "path");
    }
    let back = from_str(&old.to_string()).unwrap();
    assert!(back.cgroup_names.is_empty());
    assert_eq!(back.cgroups, testdata::named_cgroups().cgroups);
    // An unknown runtime is named with its record.
    let bad = edited(|v| v["cgroups"][0]["runtime"] = "rkt".into());
    assert_eq!(
        from_str(&bad).unwrap_err().to_string(),
        "cgroups 0: unknown runtime \"rkt\""
    );
}

#[test]
fn thirty_series_stay_small() {
    let s = testdata::many_series(30);
    let text = to_string(&s);
    let v1: (usize, usize) = (0..30)
        .map(|i| v1_histogram(testdata::many_series_calls(i).1))
        .map(|h| (v1_encoded(&h, false).len(), v1_encoded(&h, true).len()))
        .fold((0, 0), |(a, b), (p, d)| (a + p, b + d));
    let buckets: usize = s.series.values().map(|l| l.buckets().count()).sum();
    eprintln!(
        "30 series: file {} bytes, {buckets} buckets; version 1 histograms: V2 {} bytes, \
         V2+deflate {} bytes (base64)",
        text.len(),
        v1.0,
        v1.1
    );
    assert!(text.len() < 100_000, "{} bytes", text.len());
    let capture = testdata::umount_capture();
    let umount = to_string(&capture).len();
    let buckets: usize = capture.series.values().map(|l| l.buckets().count()).sum();
    eprintln!(
        "the umount capture (11 series, 300 calls each at most): {umount} bytes, \
         {buckets} buckets"
    );
    assert!(umount < 20_000, "{umount} bytes");
}

#[test]
fn truncated_files_say_where_they_end() {
    let text = to_string(&testdata::umount_capture());
    let cut = &text[..text.len() / 2];
    let msg = load_err(cut);
    assert!(msg.starts_with("truncated JSON at line "), "{msg}");
    assert_eq!(
        load_err("{\n  \"format\": \"tracer-capture\",\n  \"ver"),
        "truncated JSON at line 3 column 6"
    );
    assert_eq!(load_err(""), "truncated JSON at line 1 column 0");
}

#[test]
fn corrupt_and_foreign_files_are_named_as_such() {
    assert_eq!(
        load_err("{\"format\" 1}"),
        "invalid JSON at line 1 column 11: expected `:`"
    );
    assert_eq!(
        load_err("{\n  \"format\": \"tracer-capture\"\n  \"version\": 1\n}"),
        "invalid JSON at line 3 column 3: expected `,` or `}`"
    );
    assert_eq!(
        load_err("[1, 2]"),
        "not a tracer capture file: the top level is not a JSON object"
    );
    assert_eq!(
        load_err(r#"{"format": "pcap", "version": 1}"#),
        r#"not a tracer capture file: format is "pcap", expected "tracer-capture""#
    );
    assert_eq!(
        load_err(r#"{"version": 1}"#),
        r#"not a tracer capture file: no "format" field"#
    );
    assert_eq!(
        load_err(r#"{"format": "tracer-capture", "version": "one"}"#),
        r#"invalid capture file version "one""#
    );
}

#[test]
fn future_versions_are_refused_before_their_fields_are_read() {
    assert_eq!(
        load_err(r#"{"format": "tracer-capture", "version": 7, "everything": "renamed"}"#),
        "capture file version 7 is newer than this tracer understands (5)"
    );
    // Past u64, a JSON reader holds the number as a float: 1e23 is not what was written.
    for huge in ["100000000000000000000000", "18446744073709551616", "1e300"] {
        assert_eq!(
            load_err(&format!(
                r#"{{"format": "tracer-capture", "version": {huge}}}"#
            )),
            "invalid capture file version: a number above 2^64-1 (this tracer reads 1 to 5)"
        );
    }
    for bad in ["0", "-1", "1.5"] {
        assert_eq!(
            load_err(&format!(
                r#"{{"format": "tracer-capture", "version": {bad}}}"#
            )),
            format!("invalid capture file version {bad}")
        );
    }
}

fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(&to_string(&testdata::umount_capture())).unwrap();
    edit(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn a_bad_record_is_named_by_its_index() {
    let not_a_bound = edited(|v| v["series"][4]["buckets"][0][0] = 1_000.into());
    assert_eq!(
        load_err(&not_a_bound),
        "series 4: buckets: 1000 ns is not the lower bound of a kernel bucket"
    );

    let unordered = edited(|v| {
        let b = v["series"][1]["buckets"].as_array_mut().unwrap();
        b.push(b[0].clone());
    });
    let lo = |v: &serde_json::Value| v["series"][1]["buckets"][0][0].clone();
    assert_eq!(
        load_err(&unordered),
        format!(
            "series 1: buckets: {} ns is out of order or listed twice",
            lo(&serde_json::from_str(&unordered).unwrap())
        )
    );

    let not_pairs = edited(|v| v["series"][1]["buckets"] = "HISTFAAA".into());
    assert!(
        load_err(&not_pairs).starts_with("invalid type: string \"HISTFAAA\", expected a sequence"),
        "{}",
        load_err(&not_pairs)
    );

    let no_buckets = edited(|v| {
        v["series"][3].as_object_mut().unwrap().remove("buckets");
    });
    assert_eq!(
        load_err(&no_buckets),
        "series 3: no buckets (a series has them since version 2)"
    );

    let s = testdata::umount_capture();
    let held = s.series.values().nth(2).unwrap().count();
    let miscount = edited(|v| v["series"][2]["count"] = 5.into());
    assert_eq!(
        load_err(&miscount),
        format!("series 2: buckets hold {held} calls but count is 5")
    );

    let probe = edited(|v| v["series"][0]["probe"] = "vfs_unlink".into());
    assert_eq!(load_err(&probe), "series 0: unknown probe \"vfs_unlink\"");

    let caller = edited(|v| v["series"][0]["caller"] = "nope".into());
    assert_eq!(load_err(&caller), "series 0: unknown probe \"nope\"");

    let counter = edited(|v| v["counters"][0]["counter"] = "positive_dentries".into());
    assert_eq!(
        load_err(&counter),
        "counters 0: unknown counter \"positive_dentries\""
    );

    let dup = edited(|v| {
        let first = v["probes"][0].clone();
        v["probes"].as_array_mut().unwrap().push(first);
    });
    assert!(
        load_err(&dup).ends_with("listed twice"),
        "{}",
        load_err(&dup)
    );

    let min_max = edited(|v| v["series"][0]["min_ns"] = u64::MAX.into());
    assert_eq!(load_err(&min_max), "series 0: min_ns is larger than max_ns");
}

#[test]
fn version_1_files_still_load_into_the_same_buckets() {
    let (s, calls) = snapshot_and_calls();
    // V2+deflate is what version 1 wrote; plain V2 it read too.
    for deflate in [true, false] {
        let v1 = as_v1(&s, &calls, deflate);
        assert!(v1.contains(r#""version": 1"#));
        let back = from_str(&v1).unwrap_or_else(|e| panic!("{e}\n{v1}"));
        // Every call in the kernel bucket of its value, as recording it now does.
        assert_eq!(back, s);
        // And it is written back as the current version.
        assert!(to_string(&back).contains(&format!(r#""version": {VERSION}"#)));
    }
    // Checked against the input, not the code under test: the edge series' calls.
    let edges = &s.series[&SeriesKey::new(Probe::DDelete, 5)];
    let mut expected = std::collections::BTreeMap::new();
    for &ns in &calls[calls.len() - 1] {
        *expected
            .entry(tracer_common::bucket_bounds(tracer_common::bucket_of(ns)).0)
            .or_insert(0u64) += 1;
    }
    let got: std::collections::BTreeMap<u64, u64> =
        edges.buckets().map(|(lo, _, n)| (lo, n)).collect();
    assert_eq!(got, expected);
}

#[test]
fn version_1_errors_still_name_the_histogram() {
    let (s, calls) = snapshot_and_calls();
    let v1 = as_v1(&s, &calls, true);
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&v1).unwrap();
        f(&mut v);
        v.to_string()
    };
    let bad_b64 = edit(&|v| v["series"][2]["histogram"] = "@@not base64@@".into());
    assert!(
        load_err(&bad_b64).starts_with("series 2: histogram: invalid base64"),
        "{}",
        load_err(&bad_b64)
    );
    let not_hdr = edit(&|v| v["series"][1]["histogram"] = "aGVsbG8gd29ybGQ=".into());
    assert!(
        load_err(&not_hdr).starts_with("series 1: histogram: not an hdrhistogram V2"),
        "{}",
        load_err(&not_hdr)
    );
    let miscount = edit(&|v| v["series"][0]["count"] = 5.into());
    assert_eq!(
        load_err(&miscount),
        "series 0: histogram: histogram holds 10000 values but count is 5"
    );
}

#[test]
fn a_missing_field_is_named() {
    let text = edited(|v| {
        v["meta"].as_object_mut().unwrap().remove("duration_ns");
    });
    let msg = load_err(&text);
    assert!(
        msg.starts_with("missing field `duration_ns` at line "),
        "{msg}"
    );
}

fn temp_dir(test: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("tracer-capture-file-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn load_errors_start_with_the_file_name() {
    let dir = temp_dir("load");
    let path = dir.join("cap.json");
    std::fs::write(&path, "{\"format\": \"tracer-capture\", \"version\": 7}").unwrap();
    let err = load(&path).unwrap_err();
    assert!(
        matches!(
            err.problem,
            LoadProblem::Parse(ParseError::FutureVersion(7))
        ),
        "{err:?}"
    );
    let msg = format!("{err:#}");
    assert_eq!(
        msg,
        format!(
            "{}: capture file version 7 is newer than this tracer understands (5)",
            path.display()
        )
    );
    std::fs::write(
        &path,
        "{\n  \"format\": \"tracer-capture\",\n  \"version\": 1,\n",
    )
    .unwrap();
    let msg = format!("{:#}", load(&path).unwrap_err());
    assert_eq!(
        msg,
        format!("{}: truncated JSON at line 4 column 0", path.display())
    );
    let missing = dir.join("missing.json");
    let err = load(&missing).unwrap_err();
    assert!(
        matches!(&err.problem, LoadProblem::Read(e) if e.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with(&format!("{}: ", missing.display())),
        "{msg}"
    );
    std::fs::write(&path, b"{\"format\": \"tracer-capture\xff\"}").unwrap();
    assert_eq!(
        load(&path).unwrap_err().to_string(),
        format!(
            "{}: not a tracer capture file: not UTF-8 text (byte 26 is not)",
            path.display()
        )
    );
    std::fs::remove_dir_all(dir).unwrap();
}

mod doc_example {
    use super::*;

    /// The example in `docs/capture-file.md`.
    fn example() -> &'static str {
        let doc = include_str!("../../../docs/capture-file.md");
        let start = doc.find("```json\n").expect("the doc has a JSON example") + "```json\n".len();
        let len = doc[start..].find("```").expect("the example block ends");
        &doc[start..start + len]
    }

    #[test]
    fn the_documented_example_loads_and_is_what_tracer_writes() {
        let (s, found) = from_str_with_findings(example())
            .unwrap_or_else(|e| panic!("docs/capture-file.md: {e}"));
        // 39.5 ms of waits: under every rule's threshold, so evaluated and none found.
        let found = found.expect("the example carries its findings");
        assert!(found.findings.is_empty());
        assert_eq!(
            found,
            crate::findings::Assessment::of(&s, found.kernel.clone())
        );
        let key = SeriesKey::new(Probe::SynchronizeRcu, 4_242).with_caller(Probe::NamespaceUnlock);
        let lat = &s.series[&key];
        assert_eq!(
            (lat.count(), lat.sum_ns(), lat.max_ns()),
            (2, 39_500_000, Some(21_500_000))
        );
        assert_eq!(s.counter_total(Counter::NegativeDentries), 3);
        // Same values, same histogram string as a fresh write: the doc shows the real encoding.
        let text = to_string_with_findings(&s, Some(&found));
        let written: serde_json::Value = serde_json::from_str(&text).unwrap();
        let documented: serde_json::Value = serde_json::from_str(example()).unwrap();
        assert_eq!(written, documented, "update the doc's example to:\n{text}");
    }
}

mod findings {
    use super::*;
    use crate::findings::{
        Assessment, Figure, Fitted, KernelFeatures, KernelInfo, Outcome, Prediction, Value,
    };

    /// The test capture's findings, as a capture on a 6.1 host with `rcu_normal` read as
    /// off makes them, the first with a prediction of each kind of figure.
    fn assessed() -> (Snapshot, Assessment) {
        let s = testdata::umount_capture();
        let kernel = KernelInfo {
            features: KernelFeatures {
                rcu_normal: Some(false),
                ..KernelFeatures::default()
            },
            ..KernelInfo::from_release("6.1.0-18-amd64")
        };
        let mut a = Assessment::of(&s, kernel);
        assert!(!a.findings.is_empty(), "the test capture has a finding");
        a.findings[0].prediction = Some(Prediction {
            kernel: "Linux 6.1: the capture's kernel is 6.1.0-18-amd64".into(),
            outcome: Outcome::Predicted {
                fitted: vec![Fitted {
                    key: "tick_ns".into(),
                    value: "4.00 ms".into(),
                    from: "synchronize_srcu: 300 calls, mean 12.0 ms".into(),
                }],
                not_fitted: vec!["no synchronize_rcu calls: tick_ns not fitted from RCU".into()],
                figures: vec![Figure {
                    what: "umount(2), in all".into(),
                    against: Value::Measured {
                        ns: 3_600_000_000,
                        model_ns: 3_550_000_000,
                    },
                    variant: Value::Predicted { ns: 120_000_000 },
                }],
                fidelity: vec!["not measured".into()],
            },
        });
        if let Some(f) = a.findings.get_mut(1) {
            f.prediction = Some(Prediction {
                kernel: "Linux 6.1".into(),
                outcome: Outcome::Unavailable {
                    why: "no calls to fit on".into(),
                },
            });
        }
        (s, a)
    }

    #[test]
    fn findings_and_their_predictions_round_trip_with_the_snapshot() {
        let (s, a) = assessed();
        let text = to_string_with_findings(&s, Some(&a));
        let (back, found) = from_str_with_findings(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, s);
        assert_eq!(found.as_ref(), Some(&a));
        assert_eq!(to_string_with_findings(&back, found.as_ref()), text);
        // The snapshot alone reads the same from it.
        assert_eq!(from_str(&text).unwrap(), s);
        // Evaluated and none found is not "not evaluated".
        let none = Assessment {
            kernel: a.kernel.clone(),
            findings: Vec::new(),
        };
        let text = to_string_with_findings(&testdata::empty(), Some(&none));
        assert!(text.contains(r#""findings": []"#), "{text}");
        assert_eq!(from_str_with_findings(&text).unwrap().1, Some(none));
        // A file without them says nothing of findings, and reads as not evaluated.
        let text = to_string(&s);
        assert!(!text.contains("\"findings\""));
        assert_eq!(from_str_with_findings(&text).unwrap().1, None);
    }

    #[test]
    fn older_versions_load_without_findings() {
        let (s, a) = assessed();
        let mut v: serde_json::Value =
            serde_json::from_str(&to_string_with_findings(&s, Some(&a))).unwrap();
        // Version 3 had no findings record: a field of that name is not one.
        v["version"] = 3.into();
        let (back, found) = from_str_with_findings(&v.to_string()).unwrap();
        assert_eq!(back, s);
        assert_eq!(found, None);
    }

    /// A version 4 file with findings (a umount on 6.12 and negative dentries), as a
    /// version 4 tracer wrote it: no confidence, no advice on its settings.
    const V4: &str = include_str!("v4-findings.json");

    #[test]
    fn version_4_findings_read_with_their_confidence_not_recorded() {
        use crate::findings::{Advice, Certainty, Confidence};
        assert!(V4.contains(r#""version": 4"#) && !V4.contains("confidence"));
        let (s, found) = from_str_with_findings(V4).unwrap_or_else(|e| panic!("{e}"));
        let a = found.expect("a version 4 file's findings are read");
        let ids: Vec<&str> = a.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            ["umount-rcu-grace-period", "negative-dentries-accumulating"]
        );
        for f in &a.findings {
            assert_eq!(f.confidence, Confidence::not_recorded(), "{}", f.id);
            assert_eq!(f.confidence.certainty, Certainty::NotRecorded);
            assert!(!f.kernel.tunables.is_empty(), "{}", f.id);
            for t in &f.kernel.tunables {
                assert_eq!(t.advice, Advice::Exists, "{}", t.name);
            }
        }
        assert_eq!(s.counter_total(Counter::NegativeDentries), 600_000);
        // The report says it was not recorded, not a guess.
        let printed = crate::findings::text::render(&a.findings, false);
        assert!(
            printed.contains("    certainty not recorded: the file was written before"),
            "{printed}"
        );
        // Written back, it is the current version, with what was read.
        let text = to_string_with_findings(&s, Some(&a));
        assert!(text.contains(&format!(r#""version": {VERSION}"#)));
        assert!(text.contains(r#""certainty": "not_recorded""#), "{text}");
        assert_eq!(from_str_with_findings(&text).unwrap().1, Some(a));
        // A version 5 finding without its confidence is not one.
        let mut v: serde_json::Value = serde_json::from_str(V4).unwrap();
        v["version"] = 5.into();
        let err = from_str(&v.to_string()).unwrap_err().to_string();
        assert!(
            err.starts_with("findings 0: missing field `confidence`"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_finding_is_named_by_its_index() {
        let (s, a) = assessed();
        let mut v: serde_json::Value =
            serde_json::from_str(&to_string_with_findings(&s, Some(&a))).unwrap();
        v["findings"]["findings"][0]["evidence"][0]["probe"] = "vfs_unlink".into();
        let err = from_str(&v.to_string()).unwrap_err().to_string();
        assert!(
            err.starts_with("findings 0: unknown probe \"vfs_unlink\""),
            "{err}"
        );
        let mut v: serde_json::Value =
            serde_json::from_str(&to_string_with_findings(&s, Some(&a))).unwrap();
        v["findings"]["findings"][0]
            .as_object_mut()
            .unwrap()
            .remove("severity");
        let err = from_str(&v.to_string()).unwrap_err().to_string();
        assert!(
            err.starts_with("findings 0: missing field `severity`"),
            "{err}"
        );
    }

    /// Every key of `v`, nested ones too.
    fn walk(v: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    keys.insert(k.clone());
                    walk(x, keys);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, keys)),
            _ => {}
        }
    }

    /// Every field a finding is written with, nested ones too, is in the doc's findings
    /// section: the record changes only on purpose.
    #[test]
    fn the_doc_names_every_field_of_the_findings_record() {
        let doc = include_str!("../../../docs/capture-file.md");
        let section = doc
            .split("\n## Findings (since version 4)\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("docs/capture-file.md has a findings section");
        let (s, a) = assessed();
        let v: serde_json::Value =
            serde_json::from_str(&to_string_with_findings(&s, Some(&a))).unwrap();
        let mut keys = std::collections::BTreeSet::new();
        walk(&v["findings"], &mut keys);
        assert!(keys.len() > 30, "{keys:?}");
        let missing: Vec<_> = keys
            .iter()
            .filter(|k| !section.contains(&format!("`{k}`")))
            .collect();
        assert!(missing.is_empty(), "not in the doc: {missing:?}");
    }
}
