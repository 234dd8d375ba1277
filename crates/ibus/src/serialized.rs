//! IBus's serialized objects, as libibus puts them on the wire (`src/ibusserializable.c`,
//! `ibustext.c`, `ibusattribute.c`, `ibusattrlist.c`, `ibuslookuptable.c`).
//!
//! Every IBus object travels as a D-Bus variant holding a struct whose first two fields are the
//! GType name and a dictionary of attachments (always empty here); the object's own fields
//! follow, and nested objects are variants again:
//!
//! ```text
//! IBusText        (sa{sv}sv)         "IBusText", {}, text, v:IBusAttrList
//! IBusAttrList    (sa{sv}av)         "IBusAttrList", {}, [v:IBusAttribute…]
//! IBusAttribute   (sa{sv}uuuu)       "IBusAttribute", {}, type, value, start, end
//! IBusLookupTable (sa{sv}uubbiavav)  "IBusLookupTable", {}, page_size, cursor_pos,
//!                                    cursor_visible, round, orientation,
//!                                    [v:IBusText candidates…], [v:IBusText labels…]
//! ```
//!
//! The daemon reads each field with a fixed format string, so a wrong type name or a missing
//! field is not an error it reports to us: the object is simply dropped. The tests below pin the
//! signatures.

use std::collections::HashMap;

use fastsoftmax_ime::View;
use serde::Serialize;
use zbus::{Signature, Type, Variant};

/// `v`: a value in a variant, as IBus nests every serialized object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boxed<T>(pub T);

impl<T: Type + Serialize> Serialize for Boxed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        zbus::as_variant::Serialize(&self.0).serialize(serializer)
    }
}

impl<T> Type for Boxed<T> {
    const SIGNATURE: &'static Signature = &Signature::Variant;
}

/// `a{sv}`: a serializable's attachments, which no engine message needs.
type Attachments = HashMap<String, Variant<'static>>;

/// `IBusAttrType`: what an attribute does.
pub const ATTR_UNDERLINE: u32 = 1;
/// `IBusAttrUnderline` values.
pub const UNDERLINE_SINGLE: u32 = 1;
pub const UNDERLINE_DOUBLE: u32 = 2;
/// `IBusOrientation`: candidates one per line, as Japanese input methods show them.
pub const ORIENTATION_VERTICAL: i32 = 1;

/// `IBusAttribute` `(sa{sv}uuuu)`: a decoration of `start..end`, in characters (not bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Type)]
pub struct Attribute {
    type_name: &'static str,
    attachments: Attachments,
    pub kind: u32,
    pub value: u32,
    pub start: u32,
    pub end: u32,
}

impl Attribute {
    pub fn underline(value: u32, start: u32, end: u32) -> Self {
        Attribute {
            type_name: "IBusAttribute",
            attachments: Attachments::new(),
            kind: ATTR_UNDERLINE,
            value,
            start,
            end,
        }
    }
}

/// `IBusAttrList` `(sa{sv}av)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Type)]
pub struct AttrList {
    type_name: &'static str,
    attachments: Attachments,
    pub attributes: Vec<Boxed<Attribute>>,
}

/// `IBusText` `(sa{sv}sv)`: a string and its decorations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Type)]
pub struct Text {
    type_name: &'static str,
    attachments: Attachments,
    pub text: String,
    pub attributes: Boxed<AttrList>,
}

impl Text {
    pub fn new(text: impl Into<String>, attributes: Vec<Attribute>) -> Self {
        Text {
            type_name: "IBusText",
            attachments: Attachments::new(),
            text: text.into(),
            attributes: Boxed(AttrList {
                type_name: "IBusAttrList",
                attachments: Attachments::new(),
                attributes: attributes.into_iter().map(Boxed).collect(),
            }),
        }
    }

    pub fn plain(text: impl Into<String>) -> Self {
        Text::new(text, Vec::new())
    }
}

/// `IBusLookupTable` `(sa{sv}uubbiavav)`: the candidate window. The panel shows the page that
/// holds `cursor_pos`; we send one page, so the cursor is an index into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Type)]
pub struct LookupTable {
    type_name: &'static str,
    attachments: Attachments,
    pub page_size: u32,
    pub cursor_pos: u32,
    pub cursor_visible: bool,
    pub round: bool,
    pub orientation: i32,
    pub candidates: Vec<Boxed<Text>>,
    pub labels: Vec<Boxed<Text>>,
}

impl LookupTable {
    /// The window's page as the session shows it, labelled 1–9 (the digits that pick).
    pub fn page(view: &View) -> Self {
        let labels = (1..=view.candidates.len())
            .map(|n| Boxed(Text::plain(n.to_string())))
            .collect();
        LookupTable {
            type_name: "IBusLookupTable",
            attachments: Attachments::new(),
            page_size: fastsoftmax_ime::session::PAGE as u32,
            cursor_pos: view.highlighted.unwrap_or(0) as u32,
            cursor_visible: view.highlighted.is_some(),
            round: false,
            orientation: ORIENTATION_VERTICAL,
            candidates: view
                .candidates
                .iter()
                .map(|c| Boxed(Text::plain(c.as_str())))
                .collect(),
            labels,
        }
    }
}

/// The preedit of a view and where its cursor goes (in characters).
///
/// While composing, the input is one segment with a single underline and the cursor at its
/// end. While converting, every segment is underlined and the focused one doubly, and the
/// cursor sits at the focused segment's start, so that the panel opens the candidate window
/// under the segment it offers alternatives for.
pub fn preedit(view: &View) -> (Text, u32) {
    let mut text = String::new();
    let mut attributes = Vec::new();
    let mut cursor = None;
    let mut at = 0u32;
    for (i, segment) in view.segments.iter().enumerate() {
        let len = segment.chars().count() as u32;
        let focused = view.focus == Some(i);
        if focused {
            cursor = Some(at);
        }
        let underline = if focused {
            UNDERLINE_DOUBLE
        } else {
            UNDERLINE_SINGLE
        };
        if len > 0 {
            attributes.push(Attribute::underline(underline, at, at + len));
        }
        text.push_str(segment);
        at += len;
    }
    (Text::new(text, attributes), cursor.unwrap_or(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::serialized::Context;
    use zbus::wire::{to_bytes, LE};

    fn signature<T: Type>() -> String {
        T::SIGNATURE.to_string()
    }

    #[test]
    fn signatures_are_libibus_ones() {
        assert_eq!(signature::<Attribute>(), "(sa{sv}uuuu)");
        assert_eq!(signature::<AttrList>(), "(sa{sv}av)");
        assert_eq!(signature::<Text>(), "(sa{sv}sv)");
        assert_eq!(signature::<LookupTable>(), "(sa{sv}uubbiavav)");
        assert_eq!(signature::<Boxed<Text>>(), "v");
    }

    /// A text goes out as a variant holding the nested structure the daemon reads.
    #[test]
    fn a_text_round_trips_through_a_variant() {
        let text = Text::new("今日は", vec![Attribute::underline(UNDERLINE_SINGLE, 0, 3)]);
        let bytes = to_bytes(Context::new(LE, 0), &Boxed(text)).unwrap();
        // Reading a `v` unwraps it: what is left is the IBusText structure.
        let (text, _): (Variant<'_>, _) = bytes.deserialize().unwrap();
        assert_eq!(text.value_signature().to_string(), "(sa{sv}sv)");
        let Variant::Structure(fields) = text else {
            panic!("not a structure: {text:?}")
        };
        let fields = fields.fields();
        assert_eq!(fields[0], Variant::from("IBusText"));
        assert_eq!(fields[2], Variant::from("今日は"));
        let Variant::Variant(attrs) = &fields[3] else {
            panic!("the attributes are not a variant")
        };
        assert_eq!(attrs.value_signature().to_string(), "(sa{sv}av)");
    }

    fn view(segments: &[&str], focus: Option<usize>) -> View {
        View {
            segments: segments.iter().map(|s| s.to_string()).collect(),
            focus,
            ..View::default()
        }
    }

    #[test]
    fn the_focused_segment_is_underlined_doubly_in_characters() {
        let (text, cursor) = preedit(&view(&["今日は", "いい", "天気"], Some(1)));
        assert_eq!(text.text, "今日はいい天気");
        assert_eq!(cursor, 3);
        let attrs: Vec<_> = text.attributes.0.attributes.iter().map(|a| &a.0).collect();
        assert_eq!(
            attrs
                .iter()
                .map(|a| (a.value, a.start, a.end))
                .collect::<Vec<_>>(),
            [
                (UNDERLINE_SINGLE, 0, 3),
                (UNDERLINE_DOUBLE, 3, 5),
                (UNDERLINE_SINGLE, 5, 7)
            ]
        );
        // Composing: one underlined segment, the cursor at its end.
        let (text, cursor) = preedit(&view(&["きょうh"], None));
        assert_eq!((text.text.as_str(), cursor), ("きょうh", 4));
        // Nothing typed: an empty text, no attributes.
        let (text, cursor) = preedit(&View::default());
        assert_eq!((text.text.as_str(), cursor), ("", 0));
        assert!(text.attributes.0.attributes.is_empty());
    }

    #[test]
    fn the_table_holds_the_page_with_its_cursor() {
        let view = View {
            segments: vec!["天気".into()],
            focus: Some(0),
            candidates: vec!["天気".into(), "転機".into(), "てんき".into()],
            highlighted: Some(1),
            page_start: 9,
            suggestions: Vec::new(),
        };
        let table = LookupTable::page(&view);
        assert_eq!((table.page_size, table.cursor_pos), (9, 1));
        assert!(table.cursor_visible);
        assert_eq!(table.candidates[1].0.text, "転機");
        assert_eq!(
            table
                .labels
                .iter()
                .map(|l| l.0.text.as_str())
                .collect::<Vec<_>>(),
            ["1", "2", "3"]
        );
        to_bytes(Context::new(LE, 0), &Boxed(table)).unwrap();
    }
}
