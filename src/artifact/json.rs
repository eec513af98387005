//! A compact JSON writer for `serde::Serialize` types that writes exactly the bytes
//! `serde_json::to_writer` writes, only faster where ctxpack spends its time: escaping
//! long strings.
//!
//! Every compile serializes its whole envelope (a few hundred kilobytes of prompt
//! text) to hash it into the context ledger. serde_json inspects a string one byte at
//! a time; [`write_str`] looks at eight bytes at once and copies the runs between
//! escapes in one piece, which makes escaping prompt text several times faster. The
//! rest of the format is serde_json's, to the byte: the same escapes (`\"`, `\\`,
//! `\b \f \n \r \t`, `\u00XX` in lowercase hex for other control characters, everything
//! else verbatim), integers as `itoa` writes them, finite floats as `zmij` writes them
//! and non-finite ones as `null`, enums externally tagged. Property tests hold it to
//! serde_json on arbitrary values.
//!
//! Output goes to a [`Sink`]: a `Vec<u8>`, or a [`HashSink`] that feeds BLAKE3 in
//! large pieces without ever holding the whole document.
//!
//! The writer does not sort anything: canonical order is the caller's (struct fields
//! declared in sorted order, `BTreeMap`s, and [`crate::artifact::canonical`] for free
//! JSON values).

use std::cell::RefCell;
use std::sync::Arc;

use serde::ser::{self, Impossible, Serialize};

/// Where serialized bytes go.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);

    /// One byte of punctuation (quotes, commas, colons, brackets).
    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.put(&[byte]);
    }

    /// `pre`, `bytes` and `post` in a row: a string between its quotes, a key with its
    /// comma, quotes and colon. Sinks that check for room check once.
    #[inline]
    fn put_wrapped(&mut self, pre: &[u8], bytes: &[u8], post: &[u8]) {
        self.put(pre);
        self.put(bytes);
        self.put(post);
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.push(byte);
    }

    #[inline(always)]
    fn put_wrapped(&mut self, pre: &[u8], bytes: &[u8], post: &[u8]) {
        self.reserve(pre.len() + bytes.len() + post.len());
        self.extend_from_slice(pre);
        self.extend_from_slice(bytes);
        self.extend_from_slice(post);
    }
}

/// Feeds BLAKE3 through a fixed buffer, so that the hasher sees large inputs (and can
/// use its SIMD lanes) while the document is never held whole.
pub struct HashSink {
    hasher: blake3::Hasher,
    buf: Box<[u8]>,
    /// Bytes of `buf` in use.
    len: usize,
}

/// BLAKE3 keeps the last chunk of every `update` back (it might be the root) and
/// splits the rest into power-of-two subtrees; 64 KiB pieces let most of each piece go
/// through its widest SIMD path.
const HASH_BUFFER: usize = 64 * 1024;

impl Default for HashSink {
    fn default() -> Self {
        HashSink {
            hasher: blake3::Hasher::new(),
            buf: vec![0; HASH_BUFFER].into_boxed_slice(),
            len: 0,
        }
    }
}

impl HashSink {
    /// The BLAKE3 of everything put so far.
    pub fn finalize(mut self) -> blake3::Hash {
        self.flush();
        self.hasher.finalize()
    }

    fn flush(&mut self) {
        if let Some(held) = self.buf.get(..self.len) {
            self.hasher.update(held);
        }
        self.len = 0;
    }

    /// Makes room for `n` more bytes, hashing what the buffer holds if needed. Returns
    /// whether they fit (a piece larger than the buffer goes to the hasher directly).
    #[inline(always)]
    fn room(&mut self, n: usize) -> bool {
        if self.len + n > HASH_BUFFER {
            self.flush();
        }
        n <= HASH_BUFFER
    }

    /// Appends `bytes`, for which [`HashSink::room`] made room.
    #[inline(always)]
    fn append(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.len..end) {
            copy_small(dst, bytes);
            self.len = end;
        }
    }
}

/// `dst.copy_from_slice(src)` (equal lengths), with strings of up to sixteen bytes
/// copied as two overlapping fixed-size words rather than through a `memcpy` call.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n != dst.len() {
        return;
    }
    macro_rules! overlapping {
        ($w:literal) => {{
            let (head, tail) = (&src[..$w], &src[n - $w..]);
            dst[..$w].copy_from_slice(head);
            dst[n - $w..].copy_from_slice(tail);
        }};
    }
    match n {
        0 => {}
        1 => dst[0] = src[0],
        2..4 => overlapping!(2),
        4..8 => overlapping!(4),
        8..=16 => overlapping!(8),
        _ => dst.copy_from_slice(src),
    }
}

impl Sink for HashSink {
    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.room(1);
        self.append(&[byte]);
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if self.room(bytes.len()) {
            self.append(bytes);
        } else {
            self.hasher.update(bytes);
        }
    }

    #[inline(always)]
    fn put_wrapped(&mut self, pre: &[u8], bytes: &[u8], post: &[u8]) {
        if self.room(pre.len() + bytes.len() + post.len()) {
            self.append(pre);
            self.append(bytes);
            self.append(post);
        } else {
            self.put(pre);
            self.put(bytes);
            self.put(post);
        }
    }
}

/// Why serialization failed: only a map key that is not a string, a finite number, a
/// bool or a char (JSON keys are strings), or a `Serialize` impl's own error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Serializes `value` compactly into `out`.
pub fn to_sink<T: Serialize + ?Sized, S: Sink>(value: &T, out: &mut S) -> Result<(), Error> {
    value.serialize(&mut Serializer { out })
}

/// Serializes `value` compactly into a new `Vec`.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(128);
    to_sink(value, &mut out)?;
    Ok(out)
}

const fn repeat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// Whether any of the eight bytes of `word` needs escaping: `"`, `\` or below 0x20.
/// Exact as a yes/no answer (the classic zero-byte tests: borrows only ever run from
/// a byte that already matches, and bytes ≥ 0x80 never match).
#[inline]
fn needs_escape(word: u64) -> bool {
    const LO: u64 = repeat(0x01);
    const HI: u64 = repeat(0x80);
    let has_zero = |v: u64| v.wrapping_sub(LO) & !v & HI;
    let control = word.wrapping_sub(repeat(0x20)) & !word & HI;
    (control | has_zero(word ^ repeat(b'"')) | has_zero(word ^ repeat(b'\\'))) != 0
}

/// The escape of `byte`, if it needs one.
#[inline]
fn escape_of(byte: u8) -> Option<&'static [u8]> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // `\u00XX` for every control character without a short form, built once.
    static CONTROL: [[u8; 6]; 32] = {
        let mut table = [[0u8; 6]; 32];
        let mut i = 0;
        while i < 32 {
            table[i] = [b'\\', b'u', b'0', b'0', HEX[i >> 4], HEX[i & 0xf]];
            i += 1;
        }
        table
    };
    Some(match byte {
        b'"' => b"\\\"",
        b'\\' => b"\\\\",
        0x08 => b"\\b",
        0x0c => b"\\f",
        b'\n' => b"\\n",
        b'\r' => b"\\r",
        b'\t' => b"\\t",
        0x00..=0x1f => &CONTROL[byte as usize],
        _ => return None,
    })
}

/// The eight bytes of `bytes` from `at` as a word.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let word: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_ne_bytes(word))
}

/// Whether any byte of `block` needs escaping. Each byte maps to a value that is zero
/// exactly when it needs escaping (`b - 0x1f` saturating is zero below 0x20; `b ^ '"'`
/// and `b ^ '\\'` are zero on those two), and the block needs escaping when the minimum
/// is zero: a shape the compiler turns into SIMD minimums with a single reduction.
#[inline]
fn block_needs_escape(block: &[u8; BLOCK]) -> bool {
    block.iter().fold(u8::MAX, |acc, &b| {
        acc.min(b.saturating_sub(0x1f)).min(b ^ b'"').min(b ^ b'\\')
    }) == 0
}

/// Bytes scanned at a time in long strings.
const BLOCK: usize = 64;

/// The index of the first byte at or after `from` that needs escaping.
#[inline]
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    // A block at a time while nothing needs escaping (long texts), then words.
    while let Some(Ok(block)) = bytes.get(i..i + BLOCK).map(<&[u8; BLOCK]>::try_from) {
        if block_needs_escape(block) {
            break;
        }
        i += BLOCK;
    }
    while let Some(word) = word_at(bytes, i) {
        if needs_escape(word) {
            return position_from(bytes, i);
        }
        i += 8;
    }
    if i == bytes.len() {
        return None;
    }
    // Fewer than eight bytes left: the last eight bytes as one word (bytes already
    // checked are checked again, which is harmless), or for a string shorter than a
    // word, its bytes gathered into one.
    let tail = match word_at(bytes, bytes.len().saturating_sub(8)) {
        Some(word) => word,
        None => short_word(bytes),
    };
    if needs_escape(tail) {
        position_from(bytes, i)
    } else {
        None
    }
}

/// The bytes of a string shorter than eight as one word: two overlapping loads of four
/// (or two) bytes, the rest filled with a byte that needs no escape. Every byte of the
/// string is in the word, so the word needs escaping exactly when the string does.
#[inline]
fn short_word(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .and_then(|b| <[u8; 2]>::try_from(b).ok())
            .map_or(0, |b| u64::from(u16::from_le_bytes(b)))
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b)))
    };
    const FILL: u64 = repeat(b'a');
    match n {
        4.. => u32_at(0) | u32_at(n - 4) << 32,
        2.. => u16_at(0) | u16_at(n - 2) << 16 | FILL << 32,
        1 => u64::from(bytes[0]) | FILL << 8,
        0 => FILL,
    }
}

/// The first byte at or after `from` that needs escaping, byte by byte.
#[inline]
fn position_from(bytes: &[u8], from: usize) -> Option<usize> {
    let tail = bytes.get(from..)?;
    tail.iter()
        .position(|&b| escape_of(b).is_some())
        .map(|p| from + p)
}

/// Whether no byte of `bytes` needs escaping. Strings of up to sixteen bytes (most
/// keys, ids and names) take one or two word tests.
#[inline(always)]
fn is_clean(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n < 8 {
        return !needs_escape(short_word(bytes));
    }
    match (word_at(bytes, 0), word_at(bytes, n - 8)) {
        (Some(first), Some(last)) if n <= 16 => !needs_escape(first) & !needs_escape(last),
        _ => next_escape(bytes, 0).is_none(),
    }
}

/// Writes `s` as a JSON string between `pre` and `post` (which carry the quotes and
/// any punctuation around them).
#[inline(always)]
fn write_str_wrapped<S: Sink + ?Sized, const P: usize, const Q: usize>(
    out: &mut S,
    pre: &[u8; P],
    s: &str,
    post: &[u8; Q],
) {
    let bytes = s.as_bytes();
    if is_clean(bytes) {
        // Keys, ids, names and most texts: nothing to escape, one write.
        out.put_wrapped(pre, bytes, post);
    } else {
        write_escaped(out, pre, bytes, post);
    }
}

/// [`write_str_wrapped`] for a string with at least one byte to escape.
#[inline(never)]
fn write_escaped<S: Sink + ?Sized>(out: &mut S, pre: &[u8], bytes: &[u8], post: &[u8]) {
    out.put(pre);
    let mut start = 0;
    while let Some(at) = next_escape(bytes, start) {
        out.put(&bytes[start..at]);
        if let Some(escape) = escape_of(bytes[at]) {
            out.put(escape);
        }
        start = at + 1;
    }
    out.put(&bytes[start..]);
    out.put(post);
}

/// Writes `s` as a JSON string, quotes included.
pub fn write_str<S: Sink + ?Sized>(out: &mut S, s: &str) {
    write_str_wrapped(out, b"\"", s, b"\"");
}

/// An integer as `itoa` (and serde_json) writes it.
fn put_integer<S: Sink + ?Sized>(out: &mut S, v: impl itoa::Integer) {
    out.put(itoa::Buffer::new().format(v).as_bytes());
}

/// The JSON string literal of `text`, quotes included, as [`Serializer`] writes it:
/// the JSON of a [`Raw`] text.
pub(crate) fn literal(text: &str) -> Arc<str> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 16 + 2);
    write_str(&mut out, text);
    // Escaping keeps UTF-8 valid: it only replaces ASCII bytes with ASCII sequences.
    match String::from_utf8(out) {
        Ok(s) => Arc::from(s),
        Err(_) => Arc::from(serde_json::to_string(text).unwrap_or_default()),
    }
}

/// A value with its JSON written before (by [`raw`], or [`literal`] for a text):
/// [`Serializer`] copies the JSON instead of writing the value again; every other
/// serializer sees a newtype around the value, that is, the value. For what the
/// envelope repeats unchanged: the texts of cached blocks (hundreds of kilobytes to
/// escape), tools' input schemas and policies' effects (whose maps are sorted each
/// time they are written).
///
/// serde hands a serializer the value alone, so the JSON travels beside it: its
/// `Serialize` puts the value's address and the JSON in a thread-local slot that
/// [`Serializer`] takes from, and the JSON is used only for the very value it was made
/// for (the same address, which the borrow keeps alive for the call). Anything else
/// finds the slot empty or not matching, and the value is written as usual.
pub(crate) struct Raw<'a, T: ?Sized> {
    pub value: &'a T,
    /// From [`raw`] of `value`.
    pub json: &'a Arc<str>,
}

/// The newtype name by which [`Serializer`] recognises a [`Raw`].
const RAW: &str = "$ctxpack::json::Raw";

thread_local! {
    /// The address and JSON of the [`Raw`] value being serialized on this thread.
    static NEXT_RAW: RefCell<Option<(usize, Arc<str>)>> = const { RefCell::new(None) };
}

/// The address a [`Raw`] is matched by.
fn address_of<T: ?Sized>(value: &T) -> usize {
    (value as *const T).cast::<()>() as usize
}

impl<T: Serialize + ?Sized> Serialize for Raw<'_, T> {
    fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let pair = (address_of(self.value), Arc::clone(self.json));
        NEXT_RAW.with(|slot| *slot.borrow_mut() = Some(pair));
        let result = s.serialize_newtype_struct(RAW, self.value);
        NEXT_RAW.with(|slot| slot.borrow_mut().take());
        result
    }
}

/// `value` as [`Serializer`] writes it, for a [`Raw`].
pub(crate) fn raw<T: Serialize + ?Sized>(value: &T) -> Result<Arc<str>, Error> {
    let out = to_vec(value)?;
    // The serializer writes UTF-8 only.
    String::from_utf8(out)
        .map(Arc::from)
        .map_err(|e| Error(e.to_string()))
}

/// The serializer. Use [`to_sink`] or [`to_vec`].
pub struct Serializer<'o, S: Sink> {
    out: &'o mut S,
}

impl<'a, 'o, S: Sink> ser::Serializer for &'a mut Serializer<'o, S> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'o, S>;
    type SerializeTuple = Compound<'a, 'o, S>;
    type SerializeTupleStruct = Compound<'a, 'o, S>;
    type SerializeTupleVariant = Compound<'a, 'o, S>;
    type SerializeMap = Compound<'a, 'o, S>;
    type SerializeStruct = Compound<'a, 'o, S>;
    type SerializeStructVariant = Compound<'a, 'o, S>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.put(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        put_integer(self.out, v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        put_integer(self.out, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        put_integer(self.out, v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        put_integer(self.out, v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if v.is_finite() {
            self.out
                .put(zmij::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.out.put(b"null");
        }
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if v.is_finite() {
            self.out
                .put(zmij::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.out.put(b"null");
        }
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.put(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if name == RAW {
            // The very value the JSON was made from.
            if let Some((_, json)) = NEXT_RAW
                .with(|slot| slot.borrow_mut().take())
                .filter(|(at, _)| *at == address_of(value))
            {
                self.out.put(json.as_bytes());
                return Ok(());
            }
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.put_byte(b'{');
        write_str(self.out, variant);
        self.out.put_byte(b':');
        value.serialize(&mut *self)?;
        self.out.put_byte(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Ok(Compound::open(self, b"[", b"]"))
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        self.out.put_byte(b'{');
        write_str(self.out, variant);
        self.out.put_byte(b':');
        Ok(Compound::open(self, b"[", b"]}"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Ok(Compound::open(self, b"{", b"}"))
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Self::SerializeStruct, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        self.out.put_byte(b'{');
        write_str(self.out, variant);
        self.out.put_byte(b':');
        Ok(Compound::open(self, b"{", b"}}"))
    }
}

/// An array or object being written: commas between members, its closing bytes at
/// the end.
pub struct Compound<'a, 'o, S: Sink> {
    ser: &'a mut Serializer<'o, S>,
    first: bool,
    close: &'static [u8],
}

impl<'a, 'o, S: Sink> Compound<'a, 'o, S> {
    fn open(ser: &'a mut Serializer<'o, S>, open: &[u8], close: &'static [u8]) -> Self {
        ser.out.put(open);
        Compound {
            ser,
            first: true,
            close,
        }
    }

    fn comma(&mut self) {
        if !self.first {
            self.ser.out.put_byte(b',');
        }
        self.first = false;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(&mut *self.ser)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.comma();
        write_str_wrapped(self.ser.out, b"\"", key, b"\":");
        value.serialize(&mut *self.ser)
    }

    fn close(self) -> Result<(), Error> {
        self.ser.out.put(self.close);
        Ok(())
    }
}

/// Arrays (sequences, tuples, tuple structs and variants): elements separated by
/// commas. The four traits differ only in their method's name.
macro_rules! array_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl<S: Sink> ser::$trait for Compound<'_, '_, S> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

array_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl<S: Sink> ser::SerializeMap for Compound<'_, '_, S> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(MapKey {
            out: &mut *self.ser.out,
        })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.ser.out.put_byte(b':');
        value.serialize(&mut *self.ser)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl<S: Sink> ser::SerializeStruct for Compound<'_, '_, S> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl<S: Sink> ser::SerializeStructVariant for Compound<'_, '_, S> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// A map key: strings as they are; numbers and bools quoted, as serde_json writes
/// them; anything else (and a non-finite float) is an error.
struct MapKey<'o, S: Sink> {
    out: &'o mut S,
}

fn key_error() -> Error {
    Error("a map key must be a string, a finite number, a bool or a char".to_owned())
}

impl<S: Sink> MapKey<'_, S> {
    fn quoted(self, text: &str) -> Result<(), Error> {
        self.out.put_byte(b'"');
        self.out.put(text.as_bytes());
        self.out.put_byte(b'"');
        Ok(())
    }
}

impl<S: Sink> ser::Serializer for MapKey<'_, S> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.quoted(itoa::Buffer::new().format(v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(key_error());
        }
        self.quoted(zmij::Buffer::new().format_finite(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return Err(key_error());
        }
        self.quoted(zmij::Buffer::new().format_finite(v))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    fn same_as_serde_json<T: Serialize>(value: &T) {
        let ours = to_vec(value).expect("serializes");
        let theirs = serde_json::to_vec(value).expect("serializes");
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs)
        );
    }

    #[test]
    fn every_escape_matches_serde_json() {
        let all: String = (0u8..0x80).map(char::from).collect();
        same_as_serde_json(&all);
        // Escapes at every position within and across words and 64-byte blocks, with
        // every tail length, and strings shorter than a word.
        for n in 0..140 {
            for tail in 0..9 {
                for c in ['"', '\\', '\n', '\u{1}', '\u{1f}', '\u{7f}', 'é', '😀'] {
                    let s: String = "a".repeat(n) + &c.to_string() + &"b".repeat(tail);
                    same_as_serde_json(&s);
                }
                same_as_serde_json(&"x".repeat(n + tail));
            }
        }
    }

    #[test]
    fn shapes_match_serde_json() {
        #[derive(Serialize)]
        enum E {
            Unit,
            New(u8),
            Tuple(u8, String),
            Struct { a: Option<f64> },
        }
        #[derive(Serialize)]
        struct S<'a> {
            b: bool,
            bytes: &'a [u8],
            c: char,
            e: Vec<E>,
            f: f32,
            i: i128,
            keys: BTreeMap<u32, bool>,
            n: Option<()>,
            t: (i8, u64),
            #[serde(skip_serializing_if = "Option::is_none")]
            skipped: Option<u8>,
        }
        same_as_serde_json(&S {
            b: true,
            bytes: b"\x00\xff",
            c: '"',
            e: vec![
                E::Unit,
                E::New(7),
                E::Tuple(1, "x".into()),
                E::Struct { a: Some(f64::NAN) },
                E::Struct { a: Some(-0.0) },
            ],
            f: 0.1,
            i: -170141183460469231731687303715884105728,
            keys: BTreeMap::from([(1, true), (20, false)]),
            n: None,
            t: (-1, u64::MAX),
            skipped: None,
        });
        same_as_serde_json(&json!({"a": [1, -2, 2.5, 1e300, null, "é\u{0}"], "b": {}}));
    }

    #[test]
    fn non_string_keys_are_refused() {
        let mut m = BTreeMap::new();
        m.insert(vec![1], 2);
        assert!(to_vec(&m).is_err());
    }

    /// A text's literal is used only for the very text it was made from, and never
    /// outlives the `Raw` that carried it.
    #[test]
    fn a_literal_is_used_for_its_own_text_only() {
        let text: Arc<str> = Arc::from("a \"quoted\"\nline");
        let wrong: Arc<str> = Arc::from("\"not this\"");
        // A literal that does not belong to the text is not copied.
        let mismatched = Raw {
            value: &*text,
            json: &wrong,
        };
        // Same text, another allocation: the slot's text is not this one.
        let copy: Arc<str> = Arc::from(&*text);
        NEXT_RAW.with(|slot| *slot.borrow_mut() = Some((address_of(&*copy), Arc::clone(&wrong))));
        let mut out = Vec::new();
        let mut ser = Serializer { out: &mut out };
        let _ = ser::Serializer::serialize_newtype_struct(&mut ser, RAW, &*text);
        assert_eq!(out, serde_json::to_vec(&*text).unwrap());
        // The slot is taken by the serializer, and emptied after serde_json saw it.
        assert!(NEXT_RAW.with(|slot| slot.borrow().is_none()));
        assert_eq!(
            serde_json::to_string(&mismatched).unwrap(),
            serde_json::to_string(&*text).unwrap()
        );
        assert!(NEXT_RAW.with(|slot| slot.borrow().is_none()));
        let right = literal(&text);
        let matched = Raw {
            value: &*text,
            json: &right,
        };
        assert_eq!(
            to_vec(&matched).unwrap(),
            serde_json::to_vec(&*text).unwrap()
        );
    }

    /// Raw JSON is used only for the very value it was made from, and never outlives
    /// the `Raw` that carried it.
    #[test]
    fn raw_json_is_used_for_its_own_value_only() {
        let value = json!({"b": [1, "two"], "a": null});
        let wrong: Arc<str> = Arc::from("\"not this\"");
        // JSON that does not belong to the value: the slot names another address.
        let other = value.clone();
        NEXT_RAW.with(|slot| *slot.borrow_mut() = Some((address_of(&other), Arc::clone(&wrong))));
        let mut out = Vec::new();
        let mut ser = Serializer { out: &mut out };
        let _ = ser::Serializer::serialize_newtype_struct(&mut ser, RAW, &value);
        assert_eq!(out, serde_json::to_vec(&value).unwrap());
        assert!(NEXT_RAW.with(|slot| slot.borrow().is_none()));
        // A newtype of that name with an empty slot is the value.
        let mut out = Vec::new();
        let mut ser = Serializer { out: &mut out };
        let _ = ser::Serializer::serialize_newtype_struct(&mut ser, RAW, &value);
        assert_eq!(out, serde_json::to_vec(&value).unwrap());
        // Other serializers see the value, and the slot is emptied after them.
        let carried = Raw {
            value: &value,
            json: &wrong,
        };
        assert_eq!(
            serde_json::to_string(&carried).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        assert!(NEXT_RAW.with(|slot| slot.borrow().is_none()));
        // Ours copies the JSON it was given for the value (here deliberately not the
        // value's, to show the copy), and only there.
        assert_eq!(to_vec(&[&carried]).unwrap(), b"[\"not this\"]");
        assert!(NEXT_RAW.with(|slot| slot.borrow().is_none()));
    }

    #[test]
    fn hash_sink_hashes_the_bytes() {
        let value = json!({"text": "x".repeat(100_000), "n": [1, 2, 3]});
        let mut sink = HashSink::default();
        to_sink(&value, &mut sink).expect("serializes");
        let bytes = serde_json::to_vec(&value).expect("serializes");
        assert_eq!(sink.finalize(), blake3::hash(&bytes));
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x7f]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_matches_serde_json(value in arb_value()) {
            let ours = to_vec(&value).expect("serializes");
            prop_assert_eq!(ours, serde_json::to_vec(&value).expect("serializes"));
        }

        #[test]
        fn hash_sink_matches_blake3_of_the_bytes(
            lens in proptest::collection::vec(prop_oneof![0usize..40, 0usize..70_000], 1..24)
        ) {
            // Pieces of every size, crossing the buffer's end at every kind of write.
            let strings: Vec<String> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| char::from(b'a' + (i % 26) as u8).to_string().repeat(n))
                .collect();
            let mut sink = HashSink::default();
            to_sink(&strings, &mut sink).expect("serializes");
            let bytes = to_vec(&strings).expect("serializes");
            prop_assert_eq!(sink.finalize(), blake3::hash(&bytes));
        }

        #[test]
        fn a_literal_is_the_string_serde_json_writes(s in any::<String>(), ascii in "[\\x00-\\x7f]{0,64}") {
            let text: Arc<str> = Arc::from(s + &ascii);
            let json = literal(&text);
            prop_assert_eq!(json.as_bytes(), serde_json::to_vec(&*text).expect("serializes"));
            // Ours copies the literal; serde_json sees the text.
            let lit = Raw { value: &*text, json: &json };
            prop_assert_eq!(to_vec(&[&lit]).expect("serializes"), serde_json::to_vec(&[&*text]).expect("serializes"));
            prop_assert_eq!(serde_json::to_vec(&lit).expect("serializes"), serde_json::to_vec(&*text).expect("serializes"));
        }

        #[test]
        fn raw_json_is_what_serde_json_writes(value in arb_value()) {
            let json = raw(&value).expect("serializes");
            prop_assert_eq!(json.as_bytes(), serde_json::to_vec(&value).expect("serializes"));
            let carried = Raw { value: &value, json: &json };
            prop_assert_eq!(to_vec(&[&carried]).expect("serializes"), serde_json::to_vec(&[&value]).expect("serializes"));
            prop_assert_eq!(serde_json::to_vec(&carried).expect("serializes"), serde_json::to_vec(&value).expect("serializes"));
        }

        #[test]
        fn any_string_matches_serde_json(s in any::<String>(), ascii in "[\\x00-\\x7f]{0,64}") {
            let both = s + &ascii;
            prop_assert_eq!(to_vec(&both).expect("serializes"), serde_json::to_vec(&both).expect("serializes"));
        }
    }
}
