//! The one renderer contract, the one table and the one paragraph wrapper of every terminal
//! view. Every screen is a function `render(&T, Style, ...) -> String` of a typed result and a
//! [`Style`] that `cmd/` builds once from the terminal (its width, and whether it takes
//! colour); tests and files pass a bare width, which is plain text at that width. Tables come
//! in one style fitted to the width ([`table`], and [`columns`] for borderless aligned lists),
//! and text is wrapped at word boundaries, never breaking a word (a range such as
//! `0.89-0.99x` or a path stays whole). Numbers as text are `crate::format`'s.

use crate::schema::Level;
use comfy_table::presets::{NOTHING, UTF8_FULL_CONDENSED};
use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, Width};

/// How a screen is drawn: the terminal's width and whether levels may be coloured. Built once
/// per command in `cmd/` from the terminal; a bare width (`80.into()`) is plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Columns to wrap at.
    pub width: u16,
    /// Colour the level words (ANSI); off for pipes, files and `NO_COLOR`.
    pub color: bool,
}

impl Style {
    /// Plain text at `width` columns, as snapshot tests and files want it.
    pub fn plain(width: u16) -> Style {
        Style {
            width,
            color: false,
        }
    }

    /// `text` in the colour of level `l` when colour is on.
    pub fn paint_level(&self, l: Level, text: &str) -> String {
        if !self.color {
            return text.to_string();
        }
        let code = match l {
            Level::Hazard => "1;31",
            Level::Notice => "33",
            Level::Ok => "32",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// A bare width is plain text at that width (what tests and saved files want).
impl From<u16> for Style {
    fn from(width: u16) -> Style {
        Style::plain(width)
    }
}

/// Text for a terminal with every control character taken out but newline and tab: C0
/// controls, DEL and C1 controls (U+0080-U+009F). What a saved file, a command line or a
/// target's thread name carries (a hostname `"\u001b]0;pwned\u0007"` retitles a terminal)
/// reaches the screen as plain text: the escape's visible remainder (`]0;pwned`) shows what
/// was there. With `keep_colour`, whole SGR sequences (`ESC [ digits ; ... m`), the only
/// escapes cpudoctor writes itself, are kept; a forged one can then change a colour at worst.
pub fn printable(text: &str, keep_colour: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\u{1b}'
            && keep_colour
            && let Some(len) = sgr_len(rest)
        {
            out.push_str(&rest[..len]);
            rest = &rest[len..];
            continue;
        }
        if !c.is_control() || c == '\n' || c == '\t' {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The length of the SGR sequence `text` starts with (`ESC [ 1 ; 31 m`), if it starts with one.
fn sgr_len(text: &str) -> Option<usize> {
    let params = text.strip_prefix("\u{1b}[")?;
    let n = params
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';')
        .count();
    (params.as_bytes().get(n) == Some(&b'm')).then_some(2 + n + 1)
}

/// A table in the style every terminal view of cpudoctor uses, fitted to `width` columns.
pub fn table(width: u16, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width)
        .set_header(header.to_vec());
    t
}

/// Right-aligns the cells of columns `cols` of `t` (figures, so their digits line up).
pub fn align_right(t: &mut Table, cols: &[usize]) {
    for &i in cols {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// A table without borders for an aligned list: columns two spaces apart, a cell too wide
/// for its column wrapped inside it, the whole fitted to `width` columns. `header` may be
/// empty (no header line). Print it with [`lines`], which indents it and drops the spaces at
/// the ends of lines.
pub fn columns(width: u16, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    if !header.is_empty() {
        t.set_header(header.to_vec());
    }
    t
}

/// The spaces [`columns`] puts after each column.
const GAP: u16 = 2;

/// Keeps the cells of columns `cols` of `t` whole, never wrapped: names and figures, which a
/// break would make unreadable. The other columns wrap to leave them room. Call it once the
/// columns exist (after a header or a row).
pub fn keep_whole(t: &mut Table, cols: &[usize]) {
    for &i in cols {
        if let Some(c) = t.column_mut(i) {
            c.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
}

/// Makes column `col` of a [`columns`] table `chars` wide at least, so the columns of several
/// tables line up (a list in sections, one table each). Call it once the column exists.
pub fn at_least(t: &mut Table, col: usize, chars: usize) {
    if let Some(c) = t.column_mut(col) {
        let chars = u16::try_from(chars).unwrap_or(u16::MAX).saturating_add(GAP);
        c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(chars)));
    }
}

/// A [`columns`] table as text, each line after `indent` spaces and without the spaces at its
/// end, newline-terminated; nothing for a table without rows.
pub fn lines(mut t: Table, indent: u16) -> String {
    if t.row_count() == 0 {
        return String::new();
    }
    // A gap after every column but the last; every column at least as wide as its longest
    // word, so a cell wraps between words and never inside one (a range such as
    // `[0.50, 0.56]` may go to two lines, `neighbour` stays whole).
    let last = t.column_count().saturating_sub(1);
    let longest_words: Vec<usize> = (0..=last)
        .map(|i| {
            t.column_cells_with_header_iter(i)
                .flatten()
                .flat_map(|cell| {
                    cell.content()
                        .split_whitespace()
                        .map(|w| w.chars().count())
                        .collect::<Vec<_>>()
                })
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, c) in t.column_iter_mut().enumerate() {
        let gap = if i == last { 0 } else { GAP };
        c.set_padding((0, gap));
        if c.constraint().is_none() {
            let least = u16::try_from(longest_words[i]).unwrap_or(u16::MAX);
            c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
                least.saturating_add(gap),
            )));
        }
    }
    if let Some(w) = t.width() {
        t.set_width(w.saturating_sub(indent));
    }
    let pad = " ".repeat(indent as usize);
    t.lines()
        .map(|l| format!("{pad}{}\n", l.trim_end()))
        .collect()
}

/// Wraps `text` at word boundaries to `width` columns, every line starting with `indent`
/// spaces; a word longer than a line is left whole, never broken. Newline-terminated.
pub fn wrap(text: &str, width: u16, indent: usize) -> String {
    wrap_hanging(text, width, indent, indent)
}

/// [`wrap`] with the first line indented by `first` spaces and the others by `rest` (a
/// hanging indent under a label).
pub fn wrap_hanging(text: &str, width: u16, first: usize, rest: usize) -> String {
    fill(text, &" ".repeat(first), &" ".repeat(rest), width)
}

/// [`wrap`] after a label: the first line starts with `label` (`Stacks      `, `  - `), the
/// others with as many spaces. Empty text gives no line at all.
pub fn wrap_labelled(text: &str, label: &str, width: u16) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    fill(text, label, &" ".repeat(label.chars().count()), width)
}

/// The one paragraph filler: textwrap, words never broken nor hyphenated (a range such as
/// `0.89-0.99x` is one word), at least 20 columns of text.
fn fill(text: &str, first: &str, rest: &str, width: u16) -> String {
    let indent = first.chars().count().max(rest.chars().count());
    let opts = textwrap::Options::new((width as usize).max(indent + 20))
        .initial_indent(first)
        .subsequent_indent(rest)
        .break_words(false)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(text, opts);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A [`columns`] table of `rows` at `width` and `indent`.
    fn columns_of(rows: &[[&str; 3]], width: u16, indent: u16) -> String {
        let mut t = columns(width, &[]);
        for r in rows {
            t.add_row(r.to_vec());
        }
        align_right(&mut t, &[1]);
        lines(t, indent)
    }

    #[test]
    fn columns_line_up_two_spaces_apart_without_trailing_spaces() {
        let text = columns_of(
            &[
                ["pause_ns", "24.4 ns", ""],
                ["pause_cycles", "90.0 cycles", "±3.3%"],
            ],
            80,
            2,
        );
        assert_eq!(
            text,
            "  pause_ns          24.4 ns\n  pause_cycles  90.0 cycles  ±3.3%\n"
        );
        assert_eq!(columns_of(&[], 80, 2), "");
    }

    #[test]
    fn a_narrow_column_wraps_between_words_never_inside_one() {
        let sentence = "hurts spin-waits that count PAUSEs (spin locks, adaptive mutexes)";
        let text = columns_of(&[["slow_pause", "", sentence]], 40, 2);
        assert!(text.lines().count() > 1, "{text}");
        for l in text.lines() {
            assert!(l.chars().count() <= 40, "{text}");
        }
        // Every word of the sentence is on some line, whole.
        let words: Vec<&str> = text.split_whitespace().collect();
        for w in sentence.split_whitespace() {
            assert!(words.contains(&w), "{w} in {text}");
        }
        // Continuation lines hang under the sentence's column.
        let col = text.find("hurts").unwrap();
        assert!(
            text.lines()
                .skip(1)
                .all(|l| l.len() > col && l[..col].trim().is_empty())
        );
    }

    #[test]
    fn at_least_lines_up_the_columns_of_two_tables() {
        let table_of = |name: &str| {
            let mut t = columns(80, &[]);
            t.add_row(vec![name, "1.0 ns"]);
            at_least(&mut t, 0, 20);
            lines(t, 2)
        };
        let (a, b) = (table_of("short"), table_of("a_much_longer_name"));
        assert_eq!(a.find("1.0 ns"), b.find("1.0 ns"), "{a}{b}");
    }

    #[test]
    fn wrapping_never_breaks_a_word() {
        let long = "a".repeat(30);
        let out = wrap(&format!("short {long} words"), 20, 2);
        assert!(out.lines().any(|l| l.trim() == long), "{out}");
    }

    #[test]
    fn a_label_starts_the_first_line_and_indents_the_others() {
        let text = "aaaa bbbb cccc dddd eeee ffff gggg hhhh";
        let s = wrap_labelled(text, "- ", 24);
        assert_eq!(s.lines().count(), 2);
        assert!(s.starts_with("- aaaa"));
        assert!(s.lines().nth(1).unwrap().starts_with("  "));
        assert_eq!(wrap_labelled(" ", "- ", 24), "");
    }

    #[test]
    fn a_hanging_indent_indents_only_the_lines_after_the_first() {
        let t = wrap_hanging("alpha beta gamma delta epsilon zeta eta theta", 24, 0, 4);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines.len() > 1, "{t}");
        assert!(!lines[0].starts_with(' '));
        assert!(lines[1..].iter().all(|l| l.starts_with("    ")), "{t}");
    }

    /// Issue 29: a saved hostname `"\u001b]0;pwned\u0007"` retitled the reader's terminal.
    #[test]
    fn printable_takes_out_a_forged_title_escape() {
        let host = "\u{1b}]0;pwned\u{7}box";
        assert_eq!(printable(host, false), "]0;pwnedbox");
        assert_eq!(printable(host, true), "]0;pwnedbox");
        // C1 controls (the 8-bit CSI, U+009B) and DEL too; newline, tab and text stay.
        assert_eq!(printable("a\u{9b}2Jb\u{7f}\tc\nd é", false), "a2Jb\tc\nd é");
    }

    #[test]
    fn printable_keeps_colour_only_when_asked() {
        let red = "\u{1b}[1;31mslow\u{1b}[0m";
        assert_eq!(printable(red, true), red);
        assert_eq!(printable(red, false), "[1;31mslow[0m");
        // A cursor move is not colour: its ESC goes even in colour.
        assert_eq!(printable("\u{1b}[2Jx", true), "[2Jx");
    }
}
