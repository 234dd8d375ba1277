//! The DS-Softmax paper's synthetic check (Appendix A) on the 10×10 hierarchy: every expert
//! should keep sub-classes of mostly one super class.

use burn::tensor::Device;
use fastsoftmax_nn::synthetic;

#[test]
fn experts_recover_the_super_classes_of_the_10x10_hierarchy() {
    // Seeded: the data, the MLP's init (the device's generator) and DS's training. A second
    // run gives the same numbers (before the MLP's init was seeded, purity varied 0.93–1.0).
    let device = Device::flex().autodiff();
    let cfg = synthetic::default_config();
    let (r, head) = synthetic::run(10, 10, 10, &cfg, &device, &mut |_| {}).unwrap();
    let (again, _) = synthetic::run(10, 10, 10, &cfg, &device, &mut |_| {}).unwrap();
    assert_eq!(
        (r.purity, r.full_accuracy, r.ds_accuracy),
        (again.purity, again.full_accuracy, again.ds_accuracy)
    );
    assert_eq!(head.n_experts(), 10);
    assert!(r.purity >= 0.9, "purity {}", r.purity);
    assert!(
        r.full_accuracy > 0.95,
        "the MLP did not learn: {}",
        r.full_accuracy
    );
    assert!(
        r.ds_accuracy >= r.full_accuracy - 0.02,
        "DS {} vs full {}",
        r.ds_accuracy,
        r.full_accuracy
    );
    // Sparse: far fewer than all 100 classes per query.
    let last = r.ds.stages.last().unwrap();
    assert!(last.valid.mean_expert_size < 40.0, "{last:?}");
    assert_eq!(last.lost_words, 0);
}

#[test]
fn the_hierarchy_is_seeded_and_shares_centres_between_splits() {
    let a = synthetic::Hierarchy::generate(3, 4, 5, 6, 7, 1);
    let b = synthetic::Hierarchy::generate(3, 4, 5, 6, 7, 1);
    let c = synthetic::Hierarchy::generate(3, 4, 5, 6, 7, 2);
    assert_eq!(a.x, b.x);
    assert_ne!(a.x, c.x);
    assert_eq!(a.len(), 3 * 4 * 6);
    assert_eq!(a.classes(), 12);
    // Points of one sub-class stay near each other (std √d), far from other super classes.
    let mean = |h: &synthetic::Hierarchy, class: u32| -> Vec<f32> {
        let rows: Vec<&[f32]> =
            h.y.iter()
                .enumerate()
                .filter(|(_, &y)| y == class)
                .map(|(i, _)| &h.x[i * 5..(i + 1) * 5])
                .collect();
        (0..5)
            .map(|j| rows.iter().map(|r| r[j]).sum::<f32>() / rows.len() as f32)
            .collect()
    };
    let (ma, mc) = (mean(&a, 0), mean(&c, 0));
    let dist: f32 = ma
        .iter()
        .zip(&mc)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f32>()
        .sqrt();
    assert!(dist < 5.0, "the same class moved {dist} between splits");
}

/// The ablation configs that `experiments/ds.sh` runs each change one field of the config they
/// are compared with: one λ set to 0 (Figure A.1; the group-lasso run also stops at 16 experts),
/// or the paper's random first gate.
#[test]
fn each_ablation_config_changes_one_field_of_its_base() {
    use fastsoftmax_nn::ds::DsConfig;
    use serde_json::{json, Value};
    let read = |name: &str| -> Value {
        let path = format!("{}/../../{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let cfg: DsConfig = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        cfg.validate().unwrap();
        serde_json::to_value(cfg).unwrap()
    };
    let with = |base: &Value, field: &str, value: Value| {
        let mut v = base.clone();
        v[field] = value;
        v
    };
    let config = |name: &str| read(&format!("experiments/configs/{name}"));
    // The shipped `ds`'s last stage (ds-final.json at the λ = 3e-5 that ds.sh passes).
    let shipped = read("assets/models/ptb-small-lstm/heads/ds/config");
    // `synthetic` without --config, on 10 super classes.
    let synthetic = serde_json::to_value(synthetic::default_config()).unwrap();
    let synthetic = with(
        &with(&synthetic, "experts", json!(10)),
        "start_experts",
        json!(10),
    );
    assert_eq!(config("ds-synthetic-10"), synthetic);
    // Without the group lasso nothing is pruned and the rows double at every split, so that
    // mitosis stops at 16 experts, one epoch each, and has no last stage (ds.sh, step 9b).
    let ds16 = with(
        &with(&config("ds"), "experts", json!(16)),
        "final_stage_epochs",
        json!(1.0),
    );
    assert_eq!(
        config("ds-ablation-no-lasso"),
        with(&ds16, "lambda_lasso", json!(0.0))
    );
    assert_eq!(
        config("ds-synthetic-10-no-lasso"),
        with(&synthetic, "lambda_lasso", json!(0.0))
    );
    for (term, field) in [
        ("no-expert-lasso", "lambda_expert"),
        ("no-load", "lambda_load"),
    ] {
        for (name, base) in [
            (format!("ds-ablation-{term}"), config("ds")),
            (format!("ds-ablation-{term}-final"), shipped.clone()),
            (format!("ds-synthetic-10-{term}"), synthetic.clone()),
        ] {
            assert_eq!(config(&name), with(&base, field, json!(0.0)), "{name}");
        }
    }
    for (name, base) in [
        ("ds-synthetic-10-random-gate", synthetic),
        ("ds-synthetic-100-random-gate", config("ds-synthetic-100")),
    ] {
        assert_eq!(
            config(name),
            with(&base, "gate_init", json!("random")),
            "{name}"
        );
    }
}
