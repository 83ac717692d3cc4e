//! pgvector's `vector` type in its binary wire format: a big-endian `u16`
//! dimension, a `u16` that must be zero, then the components as big-endian
//! `f32`.

use bytes::{BufMut, BytesMut};
use std::error::Error;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

type BoxError = Box<dyn Error + Sync + Send>;

fn is_vector(ty: &Type) -> bool {
    ty.name() == "vector"
}

/// A borrowed vector to send.
#[derive(Debug)]
pub(crate) struct VectorRef<'a>(pub &'a [f32]);

impl ToSql for VectorRef<'_> {
    fn to_sql(&self, _ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        let dims = u16::try_from(self.0.len()).map_err(|_| {
            format!(
                "a vector of {} dimensions is too long for pgvector",
                self.0.len()
            )
        })?;
        out.reserve(4 + 4 * self.0.len());
        out.put_u16(dims);
        out.put_u16(0);
        for x in self.0 {
            out.put_f32(*x);
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        is_vector(ty)
    }

    to_sql_checked!();
}

/// A received vector.
#[derive(Debug)]
pub(crate) struct VectorOwned(pub Vec<f32>);

impl<'a> FromSql<'a> for VectorOwned {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        if raw.len() < 4 {
            return Err("a vector value shorter than its header".into());
        }
        let dims = u16::from_be_bytes([raw[0], raw[1]]) as usize;
        let body = &raw[4..];
        if body.len() != 4 * dims {
            return Err(format!(
                "a vector of {dims} dimensions with {} bytes of components",
                body.len()
            )
            .into());
        }
        Ok(VectorOwned(
            body.chunks_exact(4)
                .map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ))
    }

    fn accepts(ty: &Type) -> bool {
        is_vector(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_format_round_trips_exactly_and_rejects_bad_lengths() {
        let v = [0.5f32, -1.0 / 3.0, 1e-30, f32::MAX, 0.0];
        let mut buf = BytesMut::new();
        VectorRef(&v).to_sql(&Type::TEXT, &mut buf).unwrap();
        assert_eq!(&buf[..4], &[0, 5, 0, 0]);
        assert_eq!(buf.len(), 4 + 4 * v.len());
        assert_eq!(VectorOwned::from_sql(&Type::TEXT, &buf).unwrap().0, v);
        assert!(VectorOwned::from_sql(&Type::TEXT, &buf[..buf.len() - 1]).is_err());
        assert!(VectorOwned::from_sql(&Type::TEXT, &[0, 1]).is_err());
        let long = vec![0.0f32; 70_000];
        assert!(VectorRef(&long)
            .to_sql(&Type::TEXT, &mut BytesMut::new())
            .is_err());
    }
}
