//! The record-batch compression codecs (attributes bits 0-2), for the log cleaner,
//! which must read a compressed batch's records to compact them and writes the kept
//! ones back with the same codec. Produce and fetch never come here: batches are
//! stored and served as the producer compressed them.
//!
//! Formats, as Apache Kafka and librdkafka write them: gzip (RFC 1952), snappy either
//! raw or in the xerial framing Java clients use (kept as found), LZ4 frame format,
//! zstd frame format.

use std::io::{Read, Write};

/// A codec, as found in a batch (snappy remembers its framing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy { xerial: bool },
    Lz4,
    Zstd,
}

impl Codec {
    /// The attributes' compression code.
    pub fn code(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy { .. } => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompressionError {
    #[error("unknown compression code {0}")]
    UnknownCodec(i16),
    #[error("{codec:?} data does not decode: {detail}")]
    Corrupt { codec: Codec, detail: String },
    #[error("{codec:?} data decodes to more than {limit} bytes")]
    TooLarge { codec: Codec, limit: usize },
}

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// Decompresses a batch's records section compressed with `code`, refusing to produce
/// more than `limit` bytes (a small batch may expand to gigabytes). Returns the bytes
/// and the codec as found.
pub fn decompress(code: i16, data: &[u8], limit: usize) -> Result<(Vec<u8>, Codec), CompressionError> {
    let corrupt = |codec: Codec| {
        move |e: std::io::Error| CompressionError::Corrupt {
            codec,
            detail: e.to_string(),
        }
    };
    let read_capped = |codec: Codec, mut r: Box<dyn Read + '_>| -> Result<Vec<u8>, CompressionError> {
        let mut out = Vec::new();
        (&mut r)
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(corrupt(codec))?;
        if out.len() > limit {
            return Err(CompressionError::TooLarge { codec, limit });
        }
        Ok(out)
    };
    match code {
        0 => Ok((data.to_vec(), Codec::None)),
        1 => Ok((
            read_capped(Codec::Gzip, Box::new(flate2::read::MultiGzDecoder::new(data)))?,
            Codec::Gzip,
        )),
        2 if data.starts_with(&XERIAL_MAGIC) => {
            let codec = Codec::Snappy { xerial: true };
            let mut out = Vec::new();
            let mut at = 16; // magic, version, compatible version
            while at < data.len() {
                let len = data
                    .get(at..at + 4)
                    .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
                    .ok_or_else(|| CompressionError::Corrupt {
                        codec,
                        detail: "truncated block length".into(),
                    })?;
                let block = data
                    .get(at + 4..at + 4 + len)
                    .ok_or_else(|| CompressionError::Corrupt {
                        codec,
                        detail: format!("block of {len} bytes runs past the data"),
                    })?;
                let n = snap::raw::decompress_len(block).map_err(|e| CompressionError::Corrupt {
                    codec,
                    detail: e.to_string(),
                })?;
                if out.len() + n > limit {
                    return Err(CompressionError::TooLarge { codec, limit });
                }
                out.extend(
                    snap::raw::Decoder::new()
                        .decompress_vec(block)
                        .map_err(|e| CompressionError::Corrupt {
                            codec,
                            detail: e.to_string(),
                        })?,
                );
                at += 4 + len;
            }
            Ok((out, codec))
        }
        2 => {
            let codec = Codec::Snappy { xerial: false };
            let bad = |e: snap::Error| CompressionError::Corrupt {
                codec,
                detail: e.to_string(),
            };
            if snap::raw::decompress_len(data).map_err(bad)? > limit {
                return Err(CompressionError::TooLarge { codec, limit });
            }
            Ok((snap::raw::Decoder::new().decompress_vec(data).map_err(bad)?, codec))
        }
        3 => Ok((
            read_capped(Codec::Lz4, Box::new(lz4_flex::frame::FrameDecoder::new(data)))?,
            Codec::Lz4,
        )),
        4 => {
            let decoder = zstd::stream::read::Decoder::new(data).map_err(corrupt(Codec::Zstd))?;
            Ok((read_capped(Codec::Zstd, Box::new(decoder))?, Codec::Zstd))
        }
        other => Err(CompressionError::UnknownCodec(other)),
    }
}

/// Compresses `data` with `codec` (snappy in the framing it was found in).
pub fn compress(codec: Codec, data: &[u8]) -> std::io::Result<Vec<u8>> {
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data)?;
            e.finish()
        }
        Codec::Snappy { xerial: false } => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(std::io::Error::other),
        Codec::Snappy { xerial: true } => {
            let mut out = Vec::with_capacity(data.len() / 2 + 16);
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            // The Java client's block size.
            for chunk in data.chunks(32 * 1024) {
                let block = encoder.compress_vec(chunk).map_err(std::io::Error::other)?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        Codec::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data)?;
            e.finish().map_err(std::io::Error::other)
        }
        Codec::Zstd => zstd::stream::encode_all(data, 3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_keeps_its_framing() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Snappy { xerial: false },
            Codec::Snappy { xerial: true },
            Codec::Lz4,
            Codec::Zstd,
        ] {
            let packed = compress(codec, &data).unwrap();
            let (back, found) = decompress(codec.code(), &packed, 1 << 30).unwrap();
            assert_eq!((back == data, found), (true, codec), "{codec:?}");
            if codec != Codec::None {
                assert!(packed.len() < data.len() / 2, "{codec:?}");
                assert!(matches!(
                    decompress(codec.code(), &packed, 1000),
                    Err(CompressionError::TooLarge { .. })
                ));
                assert!(
                    decompress(codec.code(), &packed[..packed.len() / 2], 1 << 30).is_err() || codec == Codec::Gzip
                );
            }
        }
        assert!(matches!(
            decompress(5, b"x", 10),
            Err(CompressionError::UnknownCodec(5))
        ));
    }
}
