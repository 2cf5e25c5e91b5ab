//! Record batches (magic v2) as they travel on the wire and sit in segment files.
//!
//! This module owns reading and validating batch *headers*. It never decodes or
//! decompresses records on the produce path and never re-encodes a batch: the only
//! bytes the broker changes are the base offset (and partition leader epoch), both
//! outside the CRC-covered region, so the producer's CRC stays valid.

use thiserror::Error;

/// Size of the fixed v2 batch header.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batch_length` counts: base offset (8) + batch length (4).
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// What was wrong with a batch, with the byte position inside the buffer it came from.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("truncated batch at byte {position}: need {needed} bytes, {available} left")]
    Truncated {
        position: usize,
        needed: usize,
        available: usize,
    },
    #[error("batch at byte {position} has magic {magic}, only v2 record batches are supported")]
    UnsupportedMagic { position: usize, magic: i8 },
    #[error("batch at byte {position} claims length {length}, below the v2 header size")]
    BadLength { position: usize, length: i32 },
    #[error("batch at byte {position} fails its CRC32C: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        position: usize,
        stored: u32,
        computed: u32,
    },
    #[error("batch at byte {position} has record count {count} but last offset delta {delta}")]
    BadCount { position: usize, count: i32, delta: i32 },
    #[error("produced batch at byte {position} has record count {count} but last offset delta {delta}: a batch must hold at least one record and its offsets must span exactly its records (delta = count - 1)")]
    InconsistentCount { position: usize, count: i32, delta: i32 },
    #[error(
        "produced batches take {offsets} offsets together, more than the {} one segment can span",
        i32::MAX
    )]
    SpanTooWide { offsets: i64 },
    #[error(
        "produced batch at byte {position} declares {count} records but its {bytes} bytes of records hold {found}"
    )]
    RecordsDoNotMatchCount {
        position: usize,
        count: i32,
        found: u64,
        bytes: usize,
    },
    #[error("produced batch at byte {position} names compression codec {codec}, which no client knows (0 to 4: none, gzip, snappy, lz4, zstd)")]
    UnknownCodec { position: usize, codec: i16 },
    #[error("produced batch at byte {position}: record {record} does not hold together ({detail})")]
    MalformedRecord {
        position: usize,
        record: u64,
        detail: &'static str,
    },
}

/// The decoded fixed header of one v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Bytes after the length field; the whole batch is `LOG_OVERHEAD + batch_length`.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

impl BatchHeader {
    /// Parses the header at the start of `buf` (which must hold at least [`HEADER_LEN`]
    /// bytes); checks magic and length, not the CRC.
    pub fn parse(buf: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
        if buf.len() < LOG_OVERHEAD + 5 {
            return Err(BatchError::Truncated {
                position,
                needed: LOG_OVERHEAD + 5,
                available: buf.len(),
            });
        }
        let magic = buf[16] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic { position, magic });
        }
        if buf.len() < HEADER_LEN {
            return Err(BatchError::Truncated {
                position,
                needed: HEADER_LEN,
                available: buf.len(),
            });
        }
        let batch_length = be_i32(buf, 8);
        if (batch_length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::BadLength {
                position,
                length: batch_length,
            });
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, 0),
            batch_length,
            partition_leader_epoch: be_i32(buf, 12),
            magic,
            crc: u32::from_be_bytes(buf[17..21].try_into().expect("4 bytes")),
            attributes: be_i16(buf, 21),
            last_offset_delta: be_i32(buf, 23),
            base_timestamp: be_i64(buf, 27),
            max_timestamp: be_i64(buf, 35),
            producer_id: be_i64(buf, 43),
            producer_epoch: be_i16(buf, 51),
            base_sequence: be_i32(buf, 53),
            record_count: be_i32(buf, 57),
        })
    }

    /// Whole size of the batch in bytes, header included.
    pub fn total_len(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    /// Offset following this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn compression(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// Sequence of the last record, with the int32 wrap-around Kafka uses.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        (last % (i32::MAX as i64 + 1)) as i32
    }
}

/// Checks one whole batch at the start of `buf`: header, length, CRC32C and counts.
/// Returns the header; the batch occupies `header.total_len()` bytes.
pub fn validate(buf: &[u8], position: usize) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf, position)?;
    let total = header.total_len();
    if buf.len() < total {
        return Err(BatchError::Truncated {
            position,
            needed: total,
            available: buf.len(),
        });
    }
    let computed = crc32c::crc32c(&buf[CRC_START..total]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            position,
            stored: header.crc,
            computed,
        });
    }
    if header.record_count < 0
        || header.last_offset_delta < 0
        || (!header.is_control() && header.record_count > 0 && header.last_offset_delta < header.record_count - 1)
    {
        return Err(BatchError::BadCount {
            position,
            count: header.record_count,
            delta: header.last_offset_delta,
        });
    }
    Ok(header)
}

/// Validates every batch in `buf` (a produce request's records for one partition).
/// Rejects trailing partial batches: a produce request must carry whole batches.
/// Stricter than [`validate`], which also reads what is already in the log: a new
/// batch must hold at least one record and span exactly its records, as Kafka's
/// LogValidator requires (a larger delta would leave offsets no record holds).
pub fn validate_all(buf: &[u8]) -> Result<Vec<BatchHeader>, BatchError> {
    let mut headers = Vec::with_capacity(1);
    let mut pos = 0;
    let mut offsets: i64 = 0;
    while pos < buf.len() {
        let header = validate(&buf[pos..], pos)?;
        if header.record_count < 1 || header.last_offset_delta != header.record_count - 1 {
            return Err(BatchError::InconsistentCount {
                position: pos,
                count: header.record_count,
                delta: header.last_offset_delta,
            });
        }
        match header.compression() {
            0 => count_records(&buf[pos..pos + header.total_len()], pos, header.record_count)?,
            1..=4 => {}
            codec => return Err(BatchError::UnknownCodec { position: pos, codec }),
        }
        // One append goes into one segment, whose offsets span at most i32::MAX past
        // its base (the index holds them in 32 bits; a log rolls before an append
        // that would pass that, but cannot split one): several compressed batches
        // each claiming 2^31 - 1 records would.
        offsets += header.last_offset_delta as i64 + 1;
        if offsets > i32::MAX as i64 {
            return Err(BatchError::SpanTooWide { offsets });
        }
        pos += header.total_len();
        headers.push(header);
    }
    Ok(headers)
}

/// Checks that an uncompressed batch's records section holds exactly `count`
/// records, end to end, by their length prefixes alone (no record is decoded): a
/// count the records do not back would move the log end past offsets no record
/// holds, by up to 2^31 for a batch of a few bytes, and readers that count records
/// (Java's) fail on the batch. Kafka's LogValidator refuses it too. A compressed
/// batch's records are not counted: that needs decompressing on every produce.
fn count_records(batch: &[u8], position: usize, count: i32) -> Result<(), BatchError> {
    let records = &batch[HEADER_LEN..];
    let mut at = 0;
    let mut found: u64 = 0;
    let mismatch = |found| BatchError::RecordsDoNotMatchCount {
        position,
        count,
        found,
        bytes: records.len(),
    };
    while at < records.len() {
        let len = read_varint32(records, &mut at).ok_or_else(|| mismatch(found))?;
        if len < 0 || len as u64 > (records.len() - at) as u64 {
            return Err(mismatch(found));
        }
        let body = &records[at..at + len as usize];
        check_record(body).map_err(|detail| BatchError::MalformedRecord {
            position,
            record: found,
            detail,
        })?;
        at += len as usize;
        found += 1;
    }
    if found != count as u64 {
        return Err(mismatch(found));
    }
    Ok(())
}

/// Checks that one v2 record's body (after its length) holds together, as Java's
/// `DefaultRecord.readFrom` reads it: attributes, timestamp delta, offset delta, key,
/// value, headers (each with a key that is not null), ending exactly at the body's
/// end; every int varint at most five bytes. Nothing is copied.
fn check_record(body: &[u8]) -> Result<(), &'static str> {
    let mut at = 1; // attributes
    if body.is_empty() {
        return Err("empty record");
    }
    read_varint(body, &mut at)
        .filter(|_| at <= body.len())
        .ok_or("timestamp delta")?;
    read_varint32(body, &mut at).ok_or("offset delta")?;
    // A length, then that many bytes (any negative length: null, where `nullable`,
    // as Java reads it).
    let bytes = |at: &mut usize, nullable: bool, what: &'static str| -> Result<(), &'static str> {
        let len = read_varint32(body, at).ok_or(what)?;
        if len < 0 && nullable {
            return Ok(());
        }
        if len < 0 || len as usize > body.len() - *at {
            return Err(what);
        }
        *at += len as usize;
        Ok(())
    };
    bytes(&mut at, true, "key")?;
    bytes(&mut at, true, "value")?;
    let headers = read_varint32(body, &mut at).ok_or("header count")?;
    if headers < 0 {
        return Err("negative header count");
    }
    for _ in 0..headers {
        bytes(&mut at, false, "header key")?;
        bytes(&mut at, true, "header value")?;
    }
    if at != body.len() {
        return Err("bytes past its last header");
    }
    Ok(())
}

/// A zigzag varint of at most five bytes, read as Java's `ByteUtils.readVarint`
/// reads it: a fifth byte with its top bit set is an error; bits past 32 are
/// dropped.
fn read_varint32(buf: &[u8], pos: &mut usize) -> Option<i32> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        raw |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Some(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    None
}

/// Overwrites the base offset of the batch starting at `buf[0]`. Outside the CRC.
pub fn set_base_offset(buf: &mut [u8], base_offset: i64) {
    buf[0..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites the partition leader epoch of the batch starting at `buf[0]`. Outside the CRC.
pub fn set_partition_leader_epoch(buf: &mut [u8], epoch: i32) {
    buf[12..16].copy_from_slice(&epoch.to_be_bytes());
}

/// Walks whole batches in a buffer without CRC checks (for data already validated,
/// e.g. read back from a segment). Stops at the first incomplete batch.
pub struct HeaderIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> HeaderIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        HeaderIter { buf, pos: 0 }
    }
}

impl Iterator for HeaderIter<'_> {
    /// (byte position, header)
    type Item = (usize, BatchHeader);
    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        let header = BatchHeader::parse(rest, self.pos).ok()?;
        if rest.len() < header.total_len() {
            return None;
        }
        let at = self.pos;
        self.pos += header.total_len();
        Some((at, header))
    }
}

/// A plain record for [`build_batch`]: (key, value).
pub type PlainRecord<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Builds a v2 batch from plain records, for tests and for broker-written batches.
/// Each record is (key, value); headers are empty. Not used on the produce path.
pub fn build_batch(
    base_offset: i64,
    timestamp: i64,
    producer: Option<(i64, i16, i32)>,
    attributes: i16,
    records: &[PlainRecord<'_>],
) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut rec = Vec::new();
        rec.push(0u8); // record attributes
        put_varlong(&mut rec, 0); // timestamp delta
        put_varint(&mut rec, i as i32); // offset delta
        match key {
            Some(k) => {
                put_varint(&mut rec, k.len() as i32);
                rec.extend_from_slice(k);
            }
            None => put_varint(&mut rec, -1),
        }
        match value {
            Some(v) => {
                put_varint(&mut rec, v.len() as i32);
                rec.extend_from_slice(v);
            }
            None => put_varint(&mut rec, -1),
        }
        put_varint(&mut rec, 0); // headers
        put_varint(&mut body, rec.len() as i32);
        body.extend_from_slice(&rec);
    }
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&base_offset.to_be_bytes());
    out.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]); // crc placeholder
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&(records.len().max(1) as i32 - 1).to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&pid.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&(records.len() as i32).to_be_bytes());
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_varlong(out, v as i64)
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        build_batch(0, 1000, None, 0, &[(Some(b"k"), Some(b"v1")), (None, Some(b"v2"))])
    }

    /// `b` with its last offset delta and record count replaced, CRC recomputed.
    fn with_counts(mut b: Vec<u8>, delta: i32, count: i32) -> Vec<u8> {
        b[23..27].copy_from_slice(&delta.to_be_bytes());
        b[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn a_produced_batch_must_span_exactly_its_records() {
        assert!(validate_all(&sample()).is_ok());
        for (delta, count) in [(5, 2), (0, 2), (0, 0), (-1, 0)] {
            let b = with_counts(sample(), delta, count);
            assert!(
                matches!(
                    validate_all(&b),
                    Err(BatchError::InconsistentCount { .. } | BatchError::BadCount { .. })
                ),
                "delta {delta} count {count}"
            );
        }
        // What the log already holds is still read with the looser rule.
        assert!(validate(&with_counts(sample(), 5, 2), 0).is_ok());
    }

    /// A count the records do not back (claimed by a batch whose header is otherwise
    /// consistent) is refused for an uncompressed batch: one of a few bytes claiming
    /// 2^31 - 1 records moved the log end by 2^31.
    #[test]
    fn an_uncompressed_batch_must_hold_the_records_it_counts() {
        for count in [1, 3, i32::MAX] {
            let b = with_counts(sample(), count - 1, count);
            assert!(
                matches!(
                    validate_all(&b),
                    Err(BatchError::RecordsDoNotMatchCount { found: 2, .. })
                ),
                "count {count}: {:?}",
                validate_all(&b)
            );
        }
        // A record whose length runs past the batch.
        let mut b = sample();
        b[HEADER_LEN] = 0x7e; // zigzag 63: longer than what is left
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate_all(&b),
            Err(BatchError::RecordsDoNotMatchCount { .. })
        ));
        // A compressed batch's records are not counted (that needs decompressing).
        let mut b = with_counts(sample(), i32::MAX - 2, i32::MAX - 1);
        b[21..23].copy_from_slice(&1i16.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(validate_all(&b).is_ok());
        // But several together may not take more offsets than one segment spans.
        let two = [b.clone(), b].concat();
        assert!(matches!(validate_all(&two), Err(BatchError::SpanTooWide { .. })));
    }

    /// A batch with a codec no client knows (attribute bits 5, 6, 7) was stored:
    /// Java's consumer then failed on it at every poll ("Unknown compression type
    /// id"), stopping every group on the partition. Apache refuses it.
    #[test]
    fn a_batch_with_an_unknown_codec_is_refused() {
        for codec in [5i16, 6, 7] {
            let mut b = sample();
            b[21..23].copy_from_slice(&codec.to_be_bytes());
            let crc = crc32c::crc32c(&b[CRC_START..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            assert!(
                matches!(validate_all(&b), Err(BatchError::UnknownCodec { codec: c, .. }) if c == codec),
                "{codec}: {:?}",
                validate_all(&b)
            );
        }
    }

    /// An uncompressed batch's records were counted by their length prefixes only: a
    /// record that does not hold together (a body too short for its fields, a key or
    /// value running past it, a negative header count, bytes left over, a varint
    /// longer than Java's five bytes) was stored and acknowledged, and Java's
    /// consumer failed on it at every poll. Apache's LogValidator decodes every
    /// record of an uncompressed batch and refuses such a batch (INVALID_RECORD).
    #[test]
    fn a_record_that_does_not_hold_together_is_refused() {
        // One record: length, then its body.
        let with_record = |body: &[u8]| {
            let mut b = sample();
            b.truncate(HEADER_LEN);
            let mut len = Vec::new();
            put_varint(&mut len, body.len() as i32);
            b.extend_from_slice(&len);
            b.extend_from_slice(body);
            let total = (b.len() - LOG_OVERHEAD) as i32;
            b[8..12].copy_from_slice(&total.to_be_bytes());
            b[23..27].copy_from_slice(&0i32.to_be_bytes()); // last offset delta
            b[57..61].copy_from_slice(&1i32.to_be_bytes()); // record count
            let crc = crc32c::crc32c(&b[CRC_START..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
            b
        };
        // attributes, timestamp delta, offset delta, key -1, value 1 byte, 0 headers;
        // and what Java reads too: any negative key or value length is null, a fifth
        // varint byte's bits past 32 are dropped; a header with a null value.
        for good in [
            vec![0u8, 0, 0, 0x01, 0x02, b'v', 0],
            vec![0, 0, 0, 0x03, 0x03, 0],
            vec![0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0x01, 0x01, 0],
            vec![0, 0, 0, 0x01, 0x01, 0x02, 0x02, b'h', 0x01],
        ] {
            assert!(
                validate_all(&with_record(&good)).is_ok(),
                "{good:?}: {:?}",
                validate_all(&with_record(&good))
            );
        }
        let bad: [(&str, Vec<u8>); 7] = [
            ("attributes only", vec![0]),
            ("value past the record", vec![0, 0, 0, 0x01, 0x0a, b'v', 0]),
            ("key past the record", vec![0, 0, 0, 0x0a, b'k', 0x01, 0]),
            ("negative header count", vec![0, 0, 0, 0x01, 0x01, 0x01]),
            ("bytes left over", vec![0, 0, 0, 0x01, 0x01, 0, 0xff]),
            ("a null header key", vec![0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x01]),
            (
                "a six-byte varint",
                vec![0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 0x01, 0],
            ),
        ];
        for (what, body) in bad {
            assert!(
                matches!(
                    validate_all(&with_record(&body)),
                    Err(BatchError::MalformedRecord { .. })
                ),
                "{what}: {:?}",
                validate_all(&with_record(&body))
            );
        }
    }

    #[test]
    fn a_built_batch_validates_and_reports_its_offsets() {
        let b = sample();
        let h = validate(&b, 0).unwrap();
        assert_eq!(h.record_count, 2);
        assert_eq!(h.last_offset_delta, 1);
        assert_eq!(h.total_len(), b.len());
        assert_eq!(h.next_offset(), 2);
    }

    #[test]
    fn rewriting_the_base_offset_keeps_the_crc_valid() {
        let mut b = sample();
        set_base_offset(&mut b, 12345);
        set_partition_leader_epoch(&mut b, 7);
        let h = validate(&b, 0).unwrap();
        assert_eq!(h.base_offset, 12345);
        assert_eq!(h.partition_leader_epoch, 7);
    }

    #[test]
    fn a_flipped_payload_byte_is_a_crc_mismatch() {
        let mut b = sample();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert!(matches!(validate(&b, 0), Err(BatchError::CrcMismatch { .. })));
    }

    #[test]
    fn a_short_buffer_is_truncated_not_a_panic() {
        let b = sample();
        for cut in 0..b.len() {
            assert!(validate(&b[..cut], 0).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn old_magic_is_rejected() {
        let mut b = sample();
        b[16] = 1;
        assert!(matches!(
            validate(&b, 0),
            Err(BatchError::UnsupportedMagic { magic: 1, .. })
        ));
    }

    #[test]
    fn validate_all_walks_consecutive_batches() {
        let mut b = sample();
        b.extend_from_slice(&sample());
        assert_eq!(validate_all(&b).unwrap().len(), 2);
        assert_eq!(HeaderIter::new(&b).count(), 2);
    }

    #[test]
    fn last_sequence_wraps_at_i32_max() {
        let mut b = build_batch(
            0,
            0,
            Some((1, 0, i32::MAX)),
            0,
            &[(None, Some(b"a")), (None, Some(b"b"))],
        );
        let h = validate(&b, 0).unwrap();
        assert_eq!(h.last_sequence(), 0);
        b.clear();
    }
}

/// Attributes of a transaction marker batch: control | transactional.
pub const CONTROL_ATTRIBUTES: i16 = ATTR_CONTROL | ATTR_TRANSACTIONAL;

/// Builds a COMMIT or ABORT control batch (Apache's EndTransactionMarker): one record
/// whose key is (version 0, type 1 = commit / 0 = abort) and whose value is
/// (version 0, coordinator epoch).
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(commit as i16).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    build_batch(
        0,
        timestamp,
        Some((producer_id, producer_epoch, -1)),
        CONTROL_ATTRIBUTES,
        &[(Some(&key), Some(&value))],
    )
}

/// The marker type of a control batch: Some(true) commit, Some(false) abort, None when
/// the batch is not a readable transaction marker. Reads only the first record (an
/// uncompressed control batch holds exactly one).
pub fn control_marker_type(batch: &[u8]) -> Option<bool> {
    let h = BatchHeader::parse(batch, 0).ok()?;
    if !h.is_control() || h.compression() != 0 || batch.len() < h.total_len() {
        return None;
    }
    let mut pos = HEADER_LEN;
    let _record_len = read_varint(batch, &mut pos)?;
    pos += 1; // record attributes
    read_varint(batch, &mut pos)?; // timestamp delta
    read_varint(batch, &mut pos)?; // offset delta
    let key_len = read_varint(batch, &mut pos)?;
    if key_len < 4 || pos + key_len as usize > batch.len() {
        return None;
    }
    let kind = i16::from_be_bytes([batch[pos + 2], batch[pos + 3]]);
    match kind {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Reads a zigzag varint (up to 64 bits) at `*pos`, advancing it.
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let mut shift = 0;
    let mut raw: u64 = 0;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        raw |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    Some(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

#[cfg(test)]
mod control_tests {
    use super::*;

    #[test]
    fn control_batches_round_trip_their_marker_type() {
        let commit = build_control_batch(7, 3, true, 0, 5);
        let abort = build_control_batch(7, 3, false, 0, 5);
        let h = validate(&commit, 0).unwrap();
        assert!(h.is_control() && h.is_transactional());
        assert_eq!((h.producer_id, h.producer_epoch, h.record_count), (7, 3, 1));
        assert_eq!(control_marker_type(&commit), Some(true));
        assert_eq!(control_marker_type(&abort), Some(false));
        let plain = build_batch(0, 1, None, 0, &[(None, Some(b"v"))]);
        assert_eq!(control_marker_type(&plain), None);
    }

    #[test]
    fn varints_decode_negative_and_large_values() {
        for v in [0i64, 1, -1, 63, -64, 300, i32::MAX as i64, i64::MIN] {
            let mut buf = Vec::new();
            put_varlong(&mut buf, v);
            let mut pos = 0;
            assert_eq!(read_varint(&buf, &mut pos), Some(v));
            assert_eq!(pos, buf.len());
        }
        assert_eq!(read_varint(&[0x80, 0x80], &mut 0), None);
    }
}

/// One record of an uncompressed batch, for inspection tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Decodes the records of a whole, uncompressed batch; None for compressed batches
/// (the broker never decompresses) or malformed records.
pub fn records(batch: &[u8]) -> Option<Vec<Record>> {
    let h = BatchHeader::parse(batch, 0).ok()?;
    if h.compression() != 0 || batch.len() < h.total_len() {
        return None;
    }
    let body = &batch[..h.total_len()];
    let mut pos = HEADER_LEN;
    let mut out = Vec::with_capacity(h.record_count.clamp(0, 10_000) as usize);
    let bytes = |pos: &mut usize| -> Option<Option<Vec<u8>>> {
        let len = read_varint(body, pos)?;
        if len < 0 {
            return Some(None);
        }
        let end = pos.checked_add(len as usize)?;
        let v = body.get(*pos..end)?.to_vec();
        *pos = end;
        Some(Some(v))
    };
    for _ in 0..h.record_count {
        let _len = read_varint(body, &mut pos)?;
        pos += 1; // attributes
        let ts_delta = read_varint(body, &mut pos)?;
        let off_delta = read_varint(body, &mut pos)?;
        let key = bytes(&mut pos)?;
        let value = bytes(&mut pos)?;
        let n_headers = read_varint(body, &mut pos)?;
        let mut headers = Vec::new();
        for _ in 0..n_headers.max(0) {
            let k = bytes(&mut pos)?.unwrap_or_default();
            let v = bytes(&mut pos)?;
            headers.push((String::from_utf8_lossy(&k).into_owned(), v));
        }
        out.push(Record {
            offset: h.base_offset + off_delta,
            timestamp: h.base_timestamp + ts_delta,
            key,
            value,
            headers,
        });
    }
    Some(out)
}

#[cfg(test)]
mod record_tests {
    use super::*;

    #[test]
    fn records_of_a_built_batch_decode_back() {
        let b = build_batch(10, 1000, None, 0, &[(Some(b"k"), Some(b"v1")), (None, None)]);
        let r = records(&b).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].offset, r[0].key.as_deref(), r[0].value.as_deref()),
            (10, Some(&b"k"[..]), Some(&b"v1"[..]))
        );
        assert_eq!((r[1].offset, r[1].key.clone(), r[1].value.clone()), (11, None, None));
        let mut compressed = b.clone();
        compressed[22] |= 1;
        assert_eq!(records(&compressed), None);
    }
}
