//! Checkpoint averaging: the element-wise mean of the parameters of several snapshots of one
//! model, e.g. its last epochs (Junczys-Dowmunt et al. 2016 for NMT; Vaswani et al. 2017). The
//! mean of nearby points of a noisy descent usually sits lower on the loss than any of them.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;

use crate::{Error, Result};

/// Every float parameter of a module, flattened, in the module's visiting order.
struct Flatten(Vec<Tensor<1>>);

impl ModuleVisitor for Flatten {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let t = param.val();
        let n = t.shape().num_elements();
        self.0.push(t.reshape([n]));
    }
}

/// Replaces each float parameter by `(param + sum) / n`, taking the sums in visiting order.
struct Mean {
    sums: std::vec::IntoIter<Tensor<1>>,
    n: usize,
}

impl ModuleMapper for Mean {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let sum = self
            .sums
            .next()
            .expect("sums were collected from the same architecture");
        let n = self.n as f64;
        param.map(|t| {
            let dims = t.dims();
            let flat = t.reshape([sum.dims()[0]]);
            ((flat + sum) / n).reshape(dims)
        })
    }
}

/// The mean of `models` (all of one architecture): the first model's structure and parameter
/// ids, every float parameter replaced by the mean over all of them.
pub fn average<M: Module>(models: Vec<M>) -> Result<M> {
    let n = models.len();
    let mut flats = models.iter().map(|m| {
        let mut flat = Flatten(Vec::new());
        m.visit(&mut flat);
        flat.0
    });
    let own = flats
        .next()
        .ok_or_else(|| Error::Invalid("averaging needs at least one model".into()))?;
    // Σ over the other models, one flat tensor per parameter: the mapper adds the first's own.
    let mut sums: Option<Vec<Tensor<1>>> = None;
    for flat in flats {
        if flat.len() != own.len() || own.iter().zip(&flat).any(|(a, b)| a.dims() != b.dims()) {
            return Err(Error::Invalid(
                "the checkpoints to average have different shapes: they come from different model configs".into(),
            ));
        }
        sums = Some(match sums {
            None => flat,
            Some(s) => s.into_iter().zip(flat).map(|(a, b)| a + b).collect(),
        });
    }
    let first = models
        .into_iter()
        .next()
        .expect("checked above: at least one model");
    Ok(match sums {
        None => first,
        Some(sums) => first.map(&mut Mean {
            sums: sums.into_iter(),
            n,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Device, TensorData};

    fn linear(w: [f32; 6], b: [f32; 3], device: &Device) -> Linear {
        let mut l = LinearConfig::new(2, 3).init(device);
        l.weight = Param::from_tensor(Tensor::from_data(
            TensorData::new(w.to_vec(), [2, 3]),
            device,
        ));
        l.bias = Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(b.to_vec(), [3]),
            device,
        )));
        l
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    #[test]
    fn mean_of_three_linears_elementwise() {
        let device = Device::flex();
        let a = linear([1., 2., 3., 4., 5., 6.], [1., 0., -1.], &device);
        let b = linear([3., 2., 1., 0., -1., -2.], [0., 3., 2.], &device);
        let c = linear([2., 2., 2., 2., 2., 2.], [2., 0., 2.], &device);
        let m = average(vec![a, b, c]).unwrap();
        assert_eq!(values(m.weight.val()), [2., 2., 2., 2., 2., 2.]);
        assert_eq!(values(m.bias.unwrap().val()), [1., 1., 1.]);
    }

    #[test]
    fn one_model_is_itself_and_mismatched_shapes_are_an_error() {
        let device = Device::flex();
        let a = linear([1., 2., 3., 4., 5., 6.], [1., 0., -1.], &device);
        let same = average(vec![a.clone()]).unwrap();
        assert_eq!(values(same.weight.val()), values(a.weight.val()));
        let wide = LinearConfig::new(2, 4).init(&device);
        let err = average(vec![a, wide]).unwrap_err().to_string();
        assert!(err.contains("different shapes"), "{err}");
        assert!(average(Vec::<Linear>::new()).is_err());
    }
}
