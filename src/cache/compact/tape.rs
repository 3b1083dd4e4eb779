//! The tape: how a compact object keeps its JSON. The same tree as the JSON, but each string
//! and container prefixed with its length, so a read copies strings out without scanning them
//! for quotes and escapes, and numbers are stored parsed. The strings' text is kept apart, in
//! one `str` checked once when written, so reads need not check UTF-8 again. Reads decode it
//! through serde as they would decode the JSON (the same visitor calls), into any type.
//!
//! Layout of the structure: one tag byte per value; `null`, `false`, `true`; `u64`, `i64`,
//! `f64` followed by 8 little-endian bytes; a string by its length (LEB128), its text next in
//! the strings; an array or object by its entry count (4 bytes little-endian), then its items,
//! or its keys (length, no tag) each followed by its value.

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
        self.structure.push(STRING);
        self.raw_string(s);
    }

    fn raw_string(&mut self, s: &str) {
        let mut len = s.len();
        loop {
            // Seven bits at a time, low first; the high bit says more follow.
            let byte = u8::try_from(len & 0x7f).unwrap_or_default();
            len >>= 7;
            if len == 0 {
                self.structure.push(byte);
                break;
            }
            self.structure.push(byte | 0x80);
        }
        self.strings.push_str(s);
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

    /// A string after its tag: length, then bytes.
    fn str(&mut self) -> Result<&'de str, Error> {
        let first = self.byte()?;
        let len = if first & 0x80 == 0 {
            // Most strings are shorter than 128 bytes: their length is one byte.
            usize::from(first)
        } else {
            self.long_len(first)?
        };
        let (text, rest) = self.strings.split_at_checked(len).ok_or_else(corrupt)?;
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
        if self.peek()? == STRING {
            self.byte()?;
            visitor.visit_borrowed_bytes(self.str()?.as_bytes())
        } else {
            self.deserialize_any(visitor)
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
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn tape_of(value: &impl serde::Serialize) -> (Vec<u8>, String) {
        let (mut structure, mut strings) = (Vec::new(), String::new());
        encode(
            &serde_json::to_vec(value).unwrap(),
            &mut structure,
            &mut strings,
        )
        .unwrap();
        (structure, strings)
    }

    fn roundtrip(value: &Value) -> Value {
        let (structure, strings) = tape_of(value);
        let mut reader = Tape::new(&structure, &strings);
        let back = de::Deserialize::deserialize(&mut reader).unwrap();
        reader.end().unwrap();
        back
    }

    #[test]
    fn every_json_value_reads_back_as_it_was() {
        let long = "x".repeat(300);
        let value = json!({
            "null": null, "t": true, "f": false,
            "u": 18_446_744_073_709_551_615_u64, "i": -9_223_372_036_854_775_808_i64,
            "float": 1.5, "zero": 0.0, "exp": 1e300,
            "s": "quote \" backslash \\ newline \n unicode é ☃", "long": long,
            "arr": [1, "a", [], {}, [null]],
            "nested": {"a": {"b": {"c": []}}},
            "": "empty key",
        });
        assert_eq!(roundtrip(&value), value);
        for scalar in [json!(null), json!(7), json!("s"), json!([]), json!({})] {
            assert_eq!(roundtrip(&scalar), scalar);
        }
    }

    #[test]
    fn typed_reads_match_reading_the_json() {
        use k8s_openapi::api::core::v1::Pod;
        let pod = json!({
            "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": "2024-01-02T03:04:05Z"},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                     "resources": {"limits": {"cpu": "500m"}},
                     "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}]},
            "status": {"phase": "Running", "unknownField": {"x": [1, 2]}},
        });
        let (structure, strings) = tape_of(&pod);
        let from_tape: Pod =
            de::Deserialize::deserialize(&mut Tape::new(&structure, &strings)).unwrap();
        let from_json: Pod = serde_json::from_value(pod).unwrap();
        assert_eq!(from_tape, from_json);
    }

    #[test]
    fn enums_read_as_serde_json_reads_them() {
        #[derive(serde::Deserialize, PartialEq, Debug)]
        enum E {
            Unit,
            Newtype(u8),
            Tuple(u8, String),
            Struct { a: bool },
        }
        for value in [
            json!("Unit"),
            json!({"Newtype": 3}),
            json!({"Tuple": [1, "x"]}),
            json!({"Struct": {"a": true}}),
        ] {
            let (structure, strings) = tape_of(&value);
            let from_tape: E =
                de::Deserialize::deserialize(&mut Tape::new(&structure, &strings)).unwrap();
            assert_eq!(from_tape, serde_json::from_value::<E>(value).unwrap());
        }
    }

    #[test]
    fn truncated_tapes_are_errors_not_panics() {
        let (structure, strings) = tape_of(&json!({"a": ["bé", 1, {"c": null}]}));
        for cut in 0..structure.len() {
            let mut reader = Tape::new(&structure[..cut], &strings);
            let read: Result<Value, _> = de::Deserialize::deserialize(&mut reader);
            assert!(read.is_err(), "cut at {cut}");
        }
        for cut in 0..strings.len() {
            let mut reader = Tape::new(&structure, strings.get(..cut).unwrap_or(""));
            let read: Result<Value, _> = de::Deserialize::deserialize(&mut reader);
            assert!(read.is_err(), "strings cut at {cut}");
        }
    }
}
