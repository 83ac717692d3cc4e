//! Reading tensors from `model.safetensors` as f32.

use safetensors::{Dtype, SafeTensors};

use crate::error::BertError;

/// The tensors of one safetensors file, addressed without the model prefix.
pub(crate) struct Tensors<'a> {
    file: SafeTensors<'a>,
    prefix: &'static str,
}

/// Prefixes under which checkpoints store the encoder: none for a bare
/// `BertModel` (as sentence-transformers saves it), `bert.` and friends for
/// checkpoints of task models (`BertForMaskedLM`, …).
const PREFIXES: [&str; 5] = ["", "bert.", "roberta.", "model.", "encoder."];

impl<'a> Tensors<'a> {
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, BertError> {
        let file =
            SafeTensors::deserialize(bytes).map_err(|e| BertError::Weights(e.to_string()))?;
        let prefix = PREFIXES
            .into_iter()
            .find(|p| file.tensor(&format!("{p}embeddings.word_embeddings.weight")).is_ok())
            .ok_or_else(|| {
                BertError::Weights(
                    "no tensor `embeddings.word_embeddings.weight` (with or without a `bert.`/`roberta.` prefix)"
                        .to_owned(),
                )
            })?;
        Ok(Tensors { file, prefix })
    }

    /// The tensor `name` (without prefix), which must have `shape`, as f32.
    pub(crate) fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, BertError> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .file
            .tensor(&full)
            .map_err(|_| BertError::Weights(format!("missing tensor `{full}`")))?;
        if view.shape() != shape {
            return Err(BertError::Weights(format!(
                "tensor `{full}` has shape {:?}, expected {shape:?}",
                view.shape()
            )));
        }
        let data = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
                .collect(),
            other => {
                return Err(BertError::Weights(format!(
                    "tensor `{full}` has type {other:?}; implemented: F32, F16, BF16"
                )))
            }
        };
        debug_assert_eq!(values.len(), shape.iter().product::<usize>());
        Ok(values)
    }

    /// A layer norm's scale and shift, under the current (`weight`/`bias`)
    /// or the original TensorFlow (`gamma`/`beta`) names.
    pub(crate) fn layer_norm(
        &self,
        base: &str,
        width: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), BertError> {
        let has = |suffix: &str| {
            self.file
                .tensor(&format!("{}{base}.{suffix}", self.prefix))
                .is_ok()
        };
        let (w, b) = if !has("weight") && has("gamma") {
            ("gamma", "beta")
        } else {
            ("weight", "bias")
        };
        Ok((
            self.get(&format!("{base}.{w}"), &[width])?,
            self.get(&format!("{base}.{b}"), &[width])?,
        ))
    }
}

/// IEEE 754 half precision to single precision, exactly.
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: m * 2^-24, which is normal in f32.
            let shift = m.leading_zeros() - 21; // bring the leading 1 to bit 10
            let m = (m << shift) & 0x3ff;
            let e = 127 - 15 + 1 - shift;
            sign | (e << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x03ff), 1023.0 * 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
    }
}
