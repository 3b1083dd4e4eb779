//! The tape: how a compact object keeps its JSON. The same tree as the JSON, but each string
//! and container prefixed with its length, so a read copies strings out without scanning them
//! for quotes and escapes, and numbers are stored parsed. The strings' text is kept apart, in
//! one `str` checked once when written, so reads need not check UTF-8 again. Reads decode it
//! through serde as they would decode the JSON (the same visitor calls), into any type.
//!
//! Layout of the structure: one tag byte per value; `null`, `false`, `true`; `u64`, `i64`,
//! `f64` followed by 8 little-endian bytes; a string by one LEB128 number, `2 × length` with its
//! text next in the strings, or `2 × index + 1` for one of the [`super::words`] (the keys and
//! values Kubernetes objects are full of, kept nowhere per object); an array or object by its
//! entry count (4 bytes little-endian), then its items, or its keys (the same number, no tag)
//! each followed by its value.

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const U64: u8 = 3;
const I64: u8 = 4;
const F64: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;
/// A string that is a UUID in its canonical form (`8-4-4-4-12` lowercase hex digits, as every
/// `uid`): its 16 bytes.
const UUID: u8 = 9;
/// A string that is a time in Kubernetes' `metav1.Time` form (`2006-01-02T15:04:05Z`): its 14
/// digits, two per byte.
const TIME: u8 = 10;

/// Where a canonical UUID's hyphens are.
const UUID_HYPHENS: [usize; 4] = [8, 13, 18, 23];
/// Where the digits of a `metav1.Time` are; the rest is `--T::Z` at fixed places.
const TIME_DIGITS: [usize; 14] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
const TIME_TEMPLATE: &[u8; 20] = b"0000-00-00T00:00:00Z";

/// The 16 bytes of `s` if it is a UUID in canonical lowercase form.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || UUID_HYPHENS.iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let mut out = [0_u8; 16];
    let mut digits = b
        .iter()
        .enumerate()
        .filter(|(i, _)| !UUID_HYPHENS.contains(i));
    for byte in &mut out {
        let hex = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let (hi, lo) = (digits.next()?.1, digits.next()?.1);
        *byte = hex(*hi)? << 4 | hex(*lo)?;
    }
    Some(out)
}

/// The 14 digits of `s`, two per byte, if it is a `metav1.Time` (`2006-01-02T15:04:05Z`).
fn time_digits(s: &str) -> Option<[u8; 7]> {
    let b = s.as_bytes();
    if b.len() != 20 {
        return None;
    }
    for (i, (&c, &t)) in b.iter().zip(TIME_TEMPLATE).enumerate() {
        let fits = if TIME_DIGITS.contains(&i) {
            c.is_ascii_digit()
        } else {
            c == t
        };
        if !fits {
            return None;
        }
    }
    let mut out = [0_u8; 7];
    for (k, byte) in out.iter_mut().enumerate() {
        *byte = (b[TIME_DIGITS[2 * k]] - b'0') << 4 | (b[TIME_DIGITS[2 * k + 1]] - b'0');
    }
    Some(out)
}

/// Appends the tape of the JSON document `json` to `structure` and `strings`.
///
/// # Errors
/// `json` is not one valid JSON document, or a container has more than `u32::MAX` entries.
pub fn encode(
    json: &[u8],
    structure: &mut Vec<u8>,
    strings: &mut String,
) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(json);
    de::Deserializer::deserialize_any(&mut de, Writer { structure, strings })?;
    de.end()
}

/// Writes each value the JSON parser visits.
struct Writer<'o> {
    structure: &'o mut Vec<u8>,
    strings: &'o mut String,
}

impl Writer<'_> {
    fn nested(&mut self) -> Writer<'_> {
        Writer {
            structure: self.structure,
            strings: self.strings,
        }
    }

    fn string(&mut self, s: &str) {
        if let Some(bytes) = uuid_bytes(s) {
            self.structure.push(UUID);
            self.structure.extend_from_slice(&bytes);
        } else if let Some(digits) = time_digits(s) {
            self.structure.push(TIME);
            self.structure.extend_from_slice(&digits);
        } else {
            self.structure.push(STRING);
            self.raw_string(s);
        }
    }

    fn raw_string(&mut self, s: &str) {
        let len = match super::words::index(s) {
            Some(word) => {
                self.varint(2 * word + 1);
                return;
            }
            None => 2 * s.len(),
        };
        self.strings.push_str(s);
        self.varint(len);
    }

    /// Writes `n` in LEB128.
    fn varint(&mut self, mut n: usize) {
        loop {
            // Seven bits at a time, low first; the high bit says more follow.
            let byte = u8::try_from(n & 0x7f).unwrap_or_default();
            n >>= 7;
            if n == 0 {
                self.structure.push(byte);
                return;
            }
            self.structure.push(byte | 0x80);
        }
    }

    /// Writes a container's tag and a count placeholder; returns where the count goes.
    fn open(&mut self, tag: u8) -> usize {
        self.structure.push(tag);
        let at = self.structure.len();
        self.structure.extend_from_slice(&[0; 4]);
        at
    }

    fn close<E: de::Error>(&mut self, at: usize, count: usize) -> Result<(), E> {
        let count = u32::try_from(count).map_err(|_| E::custom("more than 2^32 entries"))?;
        self.structure[at..at + 4].copy_from_slice(&count.to_le_bytes());
        Ok(())
    }
}

impl<'de> Visitor<'de> for Writer<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.structure.push(NULL);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.structure.push(if v { TRUE } else { FALSE });
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.structure.push(U64);
        self.structure.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.structure.push(I64);
        self.structure.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.structure.push(F64);
        self.structure.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.string(v);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let at = self.open(ARRAY);
        let mut count = 0;
        while seq.next_element_seed(self.nested())?.is_some() {
            count += 1;
        }
        self.close(at, count)
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let at = self.open(OBJECT);
        let mut count = 0;
        while map.next_key_seed(KeyWriter(self.nested()))?.is_some() {
            map.next_value_seed(self.nested())?;
            count += 1;
        }
        self.close(at, count)
    }
}

impl<'de> DeserializeSeed<'de> for Writer<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Writes an object key (no tag).
struct KeyWriter<'o>(Writer<'o>);

impl<'de> DeserializeSeed<'de> for KeyWriter<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyWriter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.0.raw_string(v);
        Ok(())
    }
}

/// Reads a tape as `serde_json` reads the JSON it was made from.
pub(crate) struct Tape<'de> {
    bytes: &'de [u8],
    strings: &'de str,
}

type Error = serde_json::Error;

fn corrupt() -> Error {
    de::Error::custom("cached object is corrupt")
}

impl<'de> Tape<'de> {
    /// A reader of the tape written as `structure` and `strings`.
    pub fn new(structure: &'de [u8], strings: &'de str) -> Self {
        Self {
            bytes: structure,
            strings,
        }
    }

    /// Fails unless the whole tape was read.
    pub fn end(&self) -> Result<(), Error> {
        if self.bytes.is_empty() && self.strings.is_empty() {
            Ok(())
        } else {
            Err(corrupt())
        }
    }

    fn peek(&self) -> Result<u8, Error> {
        self.bytes.first().copied().ok_or_else(corrupt)
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], Error> {
        let (head, rest) = self.bytes.split_at_checked(n).ok_or_else(corrupt)?;
        self.bytes = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, Error> {
        let (&byte, rest) = self.bytes.split_first().ok_or_else(corrupt)?;
        self.bytes = rest;
        Ok(byte)
    }

    fn eight(&mut self) -> Result<[u8; 8], Error> {
        self.take(8)?.try_into().map_err(|_| corrupt())
    }

    fn count(&mut self) -> Result<usize, Error> {
        let bytes: [u8; 4] = self.take(4)?.try_into().map_err(|_| corrupt())?;
        usize::try_from(u32::from_le_bytes(bytes)).map_err(|_| corrupt())
    }

    /// A string after its tag: one of the words, or its length and its text.
    fn str(&mut self) -> Result<&'de str, Error> {
        let first = self.byte()?;
        let code = if first & 0x80 == 0 {
            // Most strings are words or shorter than 64 bytes: their code is one byte.
            usize::from(first)
        } else {
            self.long_len(first)?
        };
        if code & 1 == 1 {
            return super::words::WORDS
                .get(code >> 1)
                .copied()
                .ok_or_else(corrupt);
        }
        let (text, rest) = self
            .strings
            .split_at_checked(code >> 1)
            .ok_or_else(corrupt)?;
        self.strings = rest;
        Ok(text)
    }

    /// The rest of a length of more than one byte whose first byte is `first`.
    fn long_len(&mut self, first: u8) -> Result<usize, Error> {
        let mut len = usize::from(first & 0x7f);
        let mut shift = 7;
        loop {
            let byte = self.byte()?;
            len |= usize::from(byte & 0x7f)
                .checked_shl(shift)
                .ok_or_else(corrupt)?;
            if byte & 0x80 == 0 {
                return Ok(len);
            }
            shift += 7;
        }
    }

    /// The text of a UUID or a time after its tag, written into `buf`.
    fn special<'b>(&mut self, tag: u8, buf: &'b mut [u8; 36]) -> Result<&'b str, Error> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let len = if tag == UUID {
            let bytes = self.take(16)?;
            let mut at = 0;
            for (i, byte) in bytes.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    buf[at] = b'-';
                    at += 1;
                }
                buf[at] = HEX[usize::from(byte >> 4)];
                buf[at + 1] = HEX[usize::from(byte & 0xf)];
                at += 2;
            }
            36
        } else {
            let digits = self.take(7)?;
            buf[..20].copy_from_slice(TIME_TEMPLATE);
            for (k, byte) in digits.iter().enumerate() {
                let (hi, lo) = (byte >> 4, byte & 0xf);
                if hi > 9 || lo > 9 {
                    return Err(corrupt());
                }
                buf[TIME_DIGITS[2 * k]] = b'0' + hi;
                buf[TIME_DIGITS[2 * k + 1]] = b'0' + lo;
            }
            20
        };
        std::str::from_utf8(&buf[..len]).map_err(|_| corrupt())
    }

    /// Skips one value.
    fn skip(&mut self) -> Result<(), Error> {
        match self.byte()? {
            NULL | FALSE | TRUE => {}
            U64 | I64 | F64 => {
                self.take(8)?;
            }
            STRING => {
                self.str()?;
            }
            UUID => {
                self.take(16)?;
            }
            TIME => {
                self.take(7)?;
            }
            ARRAY => {
                for _ in 0..self.count()? {
                    self.skip()?;
                }
            }
            OBJECT => {
                for _ in 0..self.count()? {
                    self.str()?;
                    self.skip()?;
                }
            }
            _ => return Err(corrupt()),
        }
        Ok(())
    }
}

impl<'de> Deserializer<'de> for &mut Tape<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.byte()? {
            NULL => visitor.visit_unit(),
            FALSE => visitor.visit_bool(false),
            TRUE => visitor.visit_bool(true),
            U64 => visitor.visit_u64(u64::from_le_bytes(self.eight()?)),
            I64 => visitor.visit_i64(i64::from_le_bytes(self.eight()?)),
            F64 => visitor.visit_f64(f64::from_le_bytes(self.eight()?)),
            STRING => visitor.visit_borrowed_str(self.str()?),
            tag @ (UUID | TIME) => visitor.visit_str(self.special(tag, &mut [0; 36])?),
            ARRAY => {
                let left = self.count()?;
                let mut items = Entries { tape: self, left };
                let value = visitor.visit_seq(&mut items)?;
                items.all_read(value)
            }
            OBJECT => {
                let left = self.count()?;
                let mut entries = Entries { tape: self, left };
                let value = visitor.visit_map(&mut entries)?;
                entries.all_read(value)
            }
            _ => Err(corrupt()),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if let Some((&NULL, rest)) = self.bytes.split_first() {
            self.bytes = rest;
            visitor.visit_none()
        } else {
            // An empty tape fails in the value's own read.
            visitor.visit_some(self)
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // As serde_json: a string's UTF-8 bytes, anything else as it is.
        match self.peek()? {
            STRING => {
                self.byte()?;
                visitor.visit_borrowed_bytes(self.str()?.as_bytes())
            }
            tag @ (UUID | TIME) => {
                self.byte()?;
                visitor.visit_bytes(self.special(tag, &mut [0; 36])?.as_bytes())
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        // As serde_json: `"Variant"`, or `{"Variant": content}`.
        match self.byte()? {
            STRING => visitor.visit_enum(self.str()?.into_deserializer()),
            tag @ (UUID | TIME) => {
                let text = self.special(tag, &mut [0; 36])?.to_owned();
                visitor.visit_enum(text.into_deserializer())
            }
            OBJECT if self.count()? == 1 => visitor.visit_enum(Variant { tape: self }),
            _ => Err(de::Error::custom(
                "expected an enum: a string or an object of one key",
            )),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.skip()?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string unit unit_struct
        seq tuple tuple_struct map struct identifier
    }
}

/// The items of an array, or the entries of an object.
struct Entries<'a, 'de> {
    tape: &'a mut Tape<'de>,
    left: usize,
}

impl Entries<'_, '_> {
    /// `value`, if the visitor read every entry (as `serde_json` requires it to).
    fn all_read<T>(&self, value: T) -> Result<T, Error> {
        if self.left == 0 {
            Ok(value)
        } else {
            Err(de::Error::custom(
                "the value has more entries than were read",
            ))
        }
    }
}

impl<'de> SeqAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.tape).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let key = self.tape.str()?;
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
        seed.deserialize(&mut *self.tape)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

/// `{"Variant": content}`.
struct Variant<'a, 'de> {
    tape: &'a mut Tape<'de>,
}

impl<'de> EnumAccess<'de> for Variant<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), Error> {
        let key = self.tape.str()?;
        let variant = seed.deserialize(de::value::BorrowedStrDeserializer::<Error>::new(key))?;
        Ok((variant, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        de::Deserialize::deserialize(&mut *self.tape)
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, Error> {
        seed.deserialize(&mut *self.tape)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.tape.deserialize_any(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.tape.deserialize_any(visitor)
    }
}

#[cfg(test)]
mod tests;
