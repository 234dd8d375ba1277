//! `bleu::corpus_bleu` against the numbers the `sacrebleu` package (version in
//! `fixtures/bleu/expected.json`) printed for the committed fixtures; `make_fixtures.py` there
//! wrote both.

use fastsoftmax_translate::bleu::corpus_bleu;

fn lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn corpus_bleu_equals_sacrebleu_on_the_fixtures() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bleu");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/expected.json")).unwrap())
            .unwrap();
    let scores = expected["scores"].as_object().unwrap();
    assert_eq!(scores.len(), 4);
    for (name, want) in scores {
        let hyps = lines(&format!("{dir}/{name}.hyp"));
        let refs = lines(&format!("{dir}/{name}.ref"));
        let got = corpus_bleu(&hyps, &refs);
        let close = |a: f64, b: &serde_json::Value| (a - b.as_f64().unwrap()).abs() < 1e-9;
        assert!(
            close(got.score, &want["score"]),
            "{name}: {} vs {}",
            got.score,
            want["score"]
        );
        assert!(
            close(got.brevity_penalty, &want["bp"]),
            "{name}: brevity penalty"
        );
        assert_eq!(
            got.sys_len as u64,
            want["sys_len"].as_u64().unwrap(),
            "{name}: sys_len"
        );
        assert_eq!(
            got.ref_len as u64,
            want["ref_len"].as_u64().unwrap(),
            "{name}: ref_len"
        );
        for (n, p) in got.precisions.iter().enumerate() {
            assert!(
                close(*p, &want["precisions"][n]),
                "{name}: {n}-gram precision {p}"
            );
        }
    }
}
