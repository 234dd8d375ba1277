//! `fastsoftmax ime`: a terminal converter. Every key goes through the engine's
//! [`Session::press`], Mozc's bindings, as the IBus engine's do: romaji typed become kana (digits
//! and symbols are typed as they are) and the best conversion and the n-best of the whole input
//! follow every key; Space converts into segments, ←/→ move between them, Shift+←/→ resize the
//! focused one, Space or ↓ again opens its candidate window (1–9 pick), F6–F10 transliterate,
//! Enter commits, Esc goes back to the kana. What is committed stays the language model's
//! context for what follows. Each key's latency is shown.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{bail, Context};
use fastsoftmax_ime::session::PAGE;
use fastsoftmax_ime::{Key, Options, Scorer, Session, UserData, View};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use unicode_width::UnicodeWidthChar;

use super::{Built, WithScorer};

/// The smallest terminal the converter draws in: the committed text, the input, one candidate,
/// the latency and the keys.
pub const MIN_WIDTH: u16 = 36;
pub const MIN_HEIGHT: u16 = 12;

/// Refuses to start without a terminal on stdin and stdout.
pub fn check_terminal() -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        bail!(
            "`fastsoftmax ime` is interactive: run it in a terminal (to convert text from a file \
             or a pipe, use `fastsoftmax ime convert` or `ime eval`)"
        );
    }
    Ok(())
}

/// Runs the converter on the terminal with the built model's scorer.
pub struct Interactive {
    /// What the title bar says about the model.
    pub title: String,
    pub options: Options,
}

impl WithScorer for Interactive {
    type Output = anyhow::Result<String>;
    fn run<S: Scorer>(self, scorer: &mut S, b: &Built) -> anyhow::Result<String> {
        let mut session = Session::new(scorer, &b.lexicon, b.spelling.clone(), self.options);
        // The user's dictionary and what was learned before; what is learned now is saved at
        // the end.
        let data = UserData::default_dir()?;
        let warnings = data.load_into(&mut session).with_context(|| {
            format!(
                "loading the user's history and dictionary from {} (`fastsoftmax ime history \
                 forget-all` starts a new history)",
                data.dir.display()
            )
        })?;
        let mut app = App::new(session, self.title);
        app.note = warnings.into_iter().next();
        let committed = app.run_terminal();
        data.save_history(app.session.history())
            .with_context(|| format!("saving the history in {}", data.dir.display()))?;
        committed
    }
}

/// The engine's key for a terminal key; `None` for keys the converter does not use (Ctrl and
/// Alt combinations among them). Tab takes the first suggestion (while converting: the next
/// candidate, as ↓ does); Shift+Tab steps back as ↑ does.
pub fn key_of(key: KeyEvent) -> Option<Key> {
    if key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    {
        return None;
    }
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    Some(match key.code {
        KeyCode::Char(' ') => Key::Space,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Esc => Key::Escape,
        KeyCode::Left if shift => Key::ShiftLeft,
        KeyCode::Right if shift => Key::ShiftRight,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Up | KeyCode::BackTab => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Tab => Key::Tab,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::F(n) => Key::Function(n),
        _ => return None,
    })
}

/// The converter's state: the session, what it shows, per-key latencies.
pub struct App<'l, S: Scorer> {
    session: Session<'l, S>,
    title: String,
    /// The session's preedit and candidate window, refreshed after every key.
    view: View,
    /// How many alternatives the focused segment has, while its window is open.
    alternatives: usize,
    /// Milliseconds of every key the session used (the key and the refreshed view).
    key_ms: Vec<f64>,
    /// A note on the last key (e.g. why it did nothing).
    note: Option<String>,
    quit: bool,
}

impl<'l, S: Scorer> App<'l, S> {
    pub fn new(session: Session<'l, S>, title: String) -> Self {
        let mut app = App {
            session,
            title,
            view: View::default(),
            alternatives: 0,
            key_ms: Vec::new(),
            note: None,
            quit: false,
        };
        app.refresh();
        app
    }

    #[cfg(test)]
    fn session(&self) -> &Session<'l, S> {
        &self.session
    }

    #[cfg(test)]
    fn quit(&self) -> bool {
        self.quit
    }

    /// Draws and reads keys until a quit key; returns the committed text.
    fn run_terminal(&mut self) -> anyhow::Result<String> {
        check_terminal()?;
        let mut terminal = ratatui::try_init().context("setting up the terminal")?;
        let result = self.event_loop(&mut terminal);
        ratatui::try_restore().context("restoring the terminal")?;
        result?;
        Ok(self.session.committed().to_string())
    }

    fn event_loop(&mut self, terminal: &mut ratatui::DefaultTerminal) -> anyhow::Result<()> {
        while !self.quit {
            terminal.draw(|f| self.draw(f))?;
            // A resize only needs the redraw above.
            if let Event::Key(key) = event::read()? {
                if key.kind != KeyEventKind::Release {
                    self.handle(key);
                }
            }
        }
        Ok(())
    }

    /// One key press: Ctrl-C (or Ctrl-D, Ctrl-Q) quits; every other key goes to the session,
    /// and a key it passes on with nothing typed acts on the text (Enter: a new paragraph).
    pub fn handle(&mut self, key: KeyEvent) {
        self.note = None;
        if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('c' | 'd' | 'q'))
        {
            self.quit = true;
            return;
        }
        let Some(key) = key_of(key) else {
            return;
        };
        let t = Instant::now();
        let reply = self.session.press(key);
        self.refresh();
        if reply.consumed {
            self.key_ms.push(t.elapsed().as_secs_f64() * 1e3);
            return;
        }
        match key {
            Key::Enter => {
                self.session.new_paragraph();
                self.refresh();
            }
            Key::Backspace => {
                self.note = Some("nothing to delete: committed text is final".into());
            }
            Key::Escape => self.note = Some("Esc clears the input; Ctrl-C quits".into()),
            Key::Space => self.note = Some("nothing to convert: type romaji first".into()),
            _ => {}
        }
    }

    /// Reads the session's view (and the size of an open window) after a key.
    fn refresh(&mut self) {
        self.view = self.session.view();
        self.alternatives = match self.view.highlighted {
            Some(_) => self.session.alternatives().len(),
            None => 0,
        };
    }

    /// The focused segment's reading, while converting.
    fn focused_reading(&self) -> String {
        self.readings()
            .into_iter()
            .nth(self.session.focus())
            .unwrap_or_default()
    }

    /// Each segment's kana, while converting.
    fn readings(&self) -> Vec<String> {
        let kana: Vec<char> = self.session.kana().chars().collect();
        self.session
            .segments()
            .iter()
            .map(|s| {
                kana[s.start.min(kana.len())..s.end.min(kana.len())]
                    .iter()
                    .collect()
            })
            .collect()
    }

    /// Lays the screen out: committed text, the preedit, candidates, latency, keys; or a note
    /// when the terminal is too small.
    pub fn draw(&self, frame: &mut Frame) {
        let area = frame.area();
        if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
            let text = format!(
                "Terminal too small ({}×{}): enlarge it to at least {MIN_WIDTH}×{MIN_HEIGHT}. \
                 Ctrl-C quits.",
                area.width, area.height
            );
            frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
            return;
        }
        let [committed, input, candidates, status] = Layout::vertical([
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Min(3),
            Constraint::Length(2),
        ])
        .areas(area);
        self.draw_committed(frame, committed);
        self.draw_input(frame, input);
        if self.session.converting() {
            self.draw_window(frame, candidates);
        } else {
            self.draw_candidates(frame, candidates);
        }
        self.draw_status(frame, status);
    }

    fn draw_committed(&self, frame: &mut Frame, area: Rect) {
        let block = Block::bordered().title(format!(" fastsoftmax ime · {} ", self.title));
        let inner = block.inner(area);
        // The end of the last line: what was just committed.
        let last = self.session.committed().rsplit('\n').next().unwrap_or("");
        let line = Line::from(tail(last, inner.width as usize));
        frame.render_widget(Paragraph::new(line).block(block), area);
    }

    /// Composing: the kana typed (letters not yet kana underlined) and the best conversion.
    /// Converting: the segments' kana and their conversion, spaced, the focused one reversed.
    fn draw_input(&self, frame: &mut Frame, area: Rect) {
        let dim = Style::new().add_modifier(Modifier::DIM);
        let underlined = Style::new().add_modifier(Modifier::UNDERLINED);
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let (title, lines) = match self.view.focus {
            Some(focus) => {
                let title = format!(
                    " input · segment {}/{} ",
                    focus + 1,
                    self.view.segments.len()
                );
                let width = Block::bordered().inner(area).width as usize;
                let reversed = underlined.add_modifier(Modifier::REVERSED | Modifier::BOLD);
                let readings = self.readings();
                let lines = vec![
                    segment_line("kana ", &readings, focus, (bold, Style::new()), width),
                    segment_line(
                        "  →  ",
                        &self.view.segments,
                        focus,
                        (reversed, underlined),
                        width,
                    ),
                ];
                (title, lines)
            }
            None => {
                let width = Block::bordered().inner(area).width as usize;
                let (kana, pending) = (self.session.kana(), self.session.pending());
                let room = width.saturating_sub(5 + text_width(pending));
                let typed = Line::from(vec![
                    Span::styled("kana ", dim),
                    Span::raw(tail(kana, room)),
                    Span::styled(tail(pending, width.saturating_sub(5)), underlined),
                ]);
                let best = self
                    .session
                    .candidates()
                    .first()
                    .map_or("", |c| c.text.as_str());
                let converted = Line::from(vec![
                    Span::styled("  →  ", dim),
                    Span::styled(tail(best, width.saturating_sub(5)), bold),
                ]);
                // The suggestions ride in the title: what Tab takes first.
                let title = match self.view.suggestions.split_first() {
                    Some((first, rest)) if !rest.is_empty() => {
                        format!(" input · Tab: {first} · {} ", rest.join(" · "))
                    }
                    Some((first, _)) => format!(" input · Tab: {first} "),
                    None => " input ".to_string(),
                };
                (title, vec![typed, converted])
            }
        };
        let block = Block::bordered().title(title);
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }

    /// Composing: the n-best conversions of the whole input with their scores, the first (what
    /// Space and Enter take) in bold.
    fn draw_candidates(&self, frame: &mut Frame, area: Rect) {
        let block = Block::bordered().title(" conversions (ln p) ");
        let inner = block.inner(area);
        let width = inner.width as usize;
        let lines: Vec<Line> = self
            .session
            .candidates()
            .iter()
            .enumerate()
            .take(inner.height as usize)
            .map(|(i, c)| {
                let score = format!(" {:8.2}", c.score);
                let room = width.saturating_sub(2 + score.len());
                let text = tail(&c.text, room);
                let pad = room.saturating_sub(text_width(&text));
                let line = format!("  {}{}{score}", text, " ".repeat(pad));
                let style = match i {
                    0 => Style::new().add_modifier(Modifier::BOLD),
                    _ => Style::new(),
                };
                Line::styled(line, style)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }

    /// Converting: the focused segment's candidate window when open (a page of 9, numbered for
    /// 1–9, the highlighted one reversed and marked `>`, `page/pages` in the title), else how to
    /// open it.
    fn draw_window(&self, frame: &mut Frame, area: Rect) {
        let reading = self.focused_reading();
        let Some(highlighted) = self.view.highlighted else {
            let block = Block::bordered().title(" candidates ");
            let hint = format!("Space or ↓: the candidates for {reading}");
            let line = Line::styled(hint, Style::new().add_modifier(Modifier::DIM));
            frame.render_widget(Paragraph::new(line).block(block), area);
            return;
        };
        let pages = self.alternatives.div_ceil(PAGE).max(1);
        let page = self.view.page_start / PAGE + 1;
        let block = Block::bordered().title(format!(" candidates · {reading} · {page}/{pages} "));
        let inner = block.inner(area);
        let width = inner.width as usize;
        // A window shorter than a page keeps the highlighted line in sight.
        let skip = (highlighted + 1).saturating_sub(inner.height as usize);
        let lines: Vec<Line> = self
            .view
            .candidates
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(i, text)| {
                let mark = if i == highlighted { '>' } else { ' ' };
                let text = tail(text, width.saturating_sub(3));
                let line = format!("{mark}{} {text}", i + 1);
                let style = match i == highlighted {
                    true => Style::new().add_modifier(Modifier::REVERSED),
                    false => Style::new(),
                };
                Line::styled(line, style)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines).block(block), area);
    }

    fn draw_status(&self, frame: &mut Frame, area: Rect) {
        let latency = match self.key_ms.last() {
            None => "per-key latency appears as you type".to_string(),
            Some(last) => {
                let mut sorted = self.key_ms.clone();
                sorted.sort_by(f64::total_cmp);
                let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
                format!(
                    "key {last:.2} ms · median {:.2} · p99 {:.2} · max {:.2} · {} keys",
                    at(0.5),
                    at(0.99),
                    at(1.0),
                    sorted.len()
                )
            }
        };
        let keys = self.note.clone().unwrap_or_else(|| self.help().to_string());
        let dim = Style::new().add_modifier(Modifier::DIM);
        let lines = vec![Line::from(latency), Line::styled(keys, dim)];
        frame.render_widget(Paragraph::new(lines), area);
    }

    /// The keys that do something now.
    fn help(&self) -> &'static str {
        if self.view.highlighted.is_some() {
            "1-9 pick · Space/↑↓ move · PgUp/PgDn · ←→ segment · Enter commit · Esc back"
        } else if self.session.converting() {
            "←→ segment · Shift+←→ resize · Space list · F6-F10 · Enter commit · Esc back"
        } else if self.view.segments.is_empty() {
            "type romaji, digits, symbols (a capital: Latin) · Enter new line · Ctrl-C quit"
        } else {
            "Tab take · Space convert · F6-F10 · Enter commit · Esc clear · Ctrl-C quit"
        }
    }
}

/// One line of segments after a label, a space between them, in `(focused, other)` styles;
/// segments before the focus are dropped (`…`) until it fits.
fn segment_line(
    label: &'static str,
    parts: &[String],
    focus: usize,
    (focused, other): (Style, Style),
    width: usize,
) -> Line<'static> {
    let room = width.saturating_sub(text_width(label));
    let upto = |from: usize| -> usize {
        let cut = usize::from(from > 0);
        cut + parts[from..=focus]
            .iter()
            .map(|p| text_width(p) + 1)
            .sum::<usize>()
            - 1
    };
    let mut from = 0;
    while from < focus && upto(from) > room {
        from += 1;
    }
    let mut spans = vec![Span::styled(
        label,
        Style::new().add_modifier(Modifier::DIM),
    )];
    if from > 0 {
        spans.push(Span::raw("…"));
    }
    for (i, part) in parts.iter().enumerate().skip(from) {
        if i > from {
            spans.push(Span::raw(" "));
        }
        if i == focus {
            let left = room.saturating_sub(upto(from) - text_width(part));
            spans.push(Span::styled(tail(part, left), focused));
        } else {
            spans.push(Span::styled(part.clone(), other));
        }
    }
    Line::from(spans)
}

/// Display columns of `s` (CJK characters take two).
fn text_width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// The end of `s` that fits in `cols` display columns, `…` first when cut.
fn tail(s: &str, cols: usize) -> String {
    if text_width(s) <= cols {
        return s.to_string();
    }
    let mut kept = Vec::new();
    let mut used = 1; // the ellipsis
    for c in s.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > cols {
            break;
        }
        used += w;
        kept.push(c);
    }
    if cols == 0 {
        return String::new();
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastsoftmax_ime::{ImeModel, IvsScorer, Repair, Sample};
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::Terminal;

    /// The shipped converter.
    fn model() -> ImeModel {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/models/ime-ja");
        ImeModel::load(&dir).unwrap()
    }

    /// The converter as `fastsoftmax ime` runs it: IVS with the top 400.
    fn app(m: &ImeModel) -> App<'_, IvsScorer<'_>> {
        let scorer = IvsScorer::new(&m.lm, Sample::Top(400), Repair::Incremental).unwrap();
        let session = Session::new(scorer, &m.lexicon, m.spelling.clone(), Options::default());
        App::new(session, "test".into())
    }

    type TestApp<'m> = App<'m, IvsScorer<'m>>;

    fn press(app: &mut TestApp<'_>, code: KeyCode) {
        app.handle(KeyEvent::new(code, KeyModifiers::NONE));
    }

    fn type_text(app: &mut TestApp<'_>, text: &str) {
        for c in text.chars() {
            press(app, KeyCode::Char(c));
        }
    }

    fn render(app: &TestApp<'_>, w: u16, h: u16) -> Buffer {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|f| app.draw(f)).unwrap();
        terminal.backend().buffer().clone()
    }

    /// The screen's text, a line per row, and where each character starts: `(x, y)` per char.
    fn text_of(buf: &Buffer) -> (String, Vec<(u16, u16)>) {
        let (w, h) = (buf.area.width, buf.area.height);
        let (mut out, mut at) = (String::new(), Vec::new());
        for y in 0..h {
            let mut x = 0;
            // A wide character's second cell holds a filler, skipped.
            while x < w {
                let symbol = buf[(x, y)].symbol();
                for _ in symbol.chars() {
                    at.push((x, y));
                }
                out.push_str(symbol);
                x += text_width(symbol).max(1) as u16;
            }
            out.push('\n');
            at.push((w, y));
        }
        (out, at)
    }

    fn screen(app: &TestApp<'_>, w: u16, h: u16) -> String {
        text_of(&render(app, w, h)).0
    }

    /// The style of the first cell of `needle`'s first occurrence after `after` on the screen.
    fn modifier_of(app: &TestApp<'_>, after: &str, needle: &str) -> Modifier {
        let buf = render(app, 80, 24);
        let (text, at) = text_of(&buf);
        let from = text
            .find(after)
            .unwrap_or_else(|| panic!("no {after:?} in\n{text}"));
        let byte = from
            + after.len()
            + text[from + after.len()..]
                .find(needle)
                .unwrap_or_else(|| panic!("no {needle:?} after {after:?} in\n{text}"));
        let chars = text[..byte].chars().count();
        buf[at[chars]].modifier
    }

    #[test]
    fn terminal_keys_map_to_the_engines_keys() {
        let k = |code, m| key_of(KeyEvent::new(code, m));
        let none = KeyModifiers::NONE;
        assert_eq!(k(KeyCode::Char('a'), none), Some(Key::Char('a')));
        assert_eq!(k(KeyCode::Char('1'), none), Some(Key::Char('1')));
        assert_eq!(
            k(KeyCode::Char('U'), KeyModifiers::SHIFT),
            Some(Key::Char('U'))
        );
        assert_eq!(k(KeyCode::Char(' '), none), Some(Key::Space));
        assert_eq!(k(KeyCode::Left, none), Some(Key::Left));
        assert_eq!(k(KeyCode::Right, none), Some(Key::Right));
        assert_eq!(k(KeyCode::Left, KeyModifiers::SHIFT), Some(Key::ShiftLeft));
        assert_eq!(
            k(KeyCode::Right, KeyModifiers::SHIFT),
            Some(Key::ShiftRight)
        );
        assert_eq!(k(KeyCode::Tab, none), Some(Key::Tab));
        assert_eq!(k(KeyCode::BackTab, KeyModifiers::SHIFT), Some(Key::Up));
        assert_eq!(k(KeyCode::PageDown, none), Some(Key::PageDown));
        assert_eq!(k(KeyCode::F(7), none), Some(Key::Function(7)));
        assert_eq!(k(KeyCode::Esc, none), Some(Key::Escape));
        assert_eq!(k(KeyCode::Char('c'), KeyModifiers::CONTROL), None);
        assert_eq!(k(KeyCode::Left, KeyModifiers::ALT), None);
        assert_eq!(k(KeyCode::Insert, none), None);
    }

    /// Digits and symbols are typed while composing (`12ji` → 12じ), as the issue asks.
    #[test]
    fn digits_are_typed_while_composing() {
        let m = model();
        let mut app = app(&m);
        type_text(&mut app, "12ji");
        assert_eq!(app.session().input(), "12じ");
        assert!(app.session().committed().is_empty());
        let s = screen(&app, 80, 24);
        assert!(s.contains("kana 12じ"), "{s}");
        assert!(s.contains("→  12"), "{s}");
        assert_eq!(app.key_ms.len(), 4, "every key the session used is timed");
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.session().input(), "");
    }

    /// Space converts into segments (the focused one reversed); → and Space open the next
    /// segment's window; a digit picks from it; Enter commits the segments as chosen.
    #[test]
    fn space_converts_arrows_move_and_digits_pick_in_the_window() {
        let m = model();
        let mut app = app(&m);
        type_text(&mut app, "kyouhaiitenki");
        let best = app.session().candidates()[0].text.clone();
        let second = app.session().candidates()[1].text.clone();
        let s = screen(&app, 80, 24);
        assert!(
            s.contains(&format!("→  {best}")) && s.contains(&second),
            "{s}"
        );
        assert!(s.contains("Space convert"), "{s}");

        press(&mut app, KeyCode::Char(' '));
        assert!(app.session().converting());
        let segments = app.view.segments.clone();
        assert!(segments.len() >= 2, "{segments:?}");
        assert_eq!(segments.concat(), best);
        let n = segments.len();
        let s = screen(&app, 80, 24);
        assert!(s.contains(&format!("→  {}", segments.join(" "))), "{s}");
        assert!(s.contains(&format!("segment 1/{n}")), "{s}");
        assert!(s.contains("Space or ↓: the candidates for"), "{s}");
        let focused = |app: &TestApp<'_>, i: usize| {
            modifier_of(app, "→  ", &app.view.segments[i]).contains(Modifier::REVERSED)
        };
        assert!(focused(&app, 0) && !focused(&app, 1));

        press(&mut app, KeyCode::Right);
        assert_eq!(app.view.focus, Some(1));
        assert!(!focused(&app, 0) && focused(&app, 1));
        assert!(screen(&app, 80, 24).contains(&format!("segment 2/{n}")));

        // Space opens the window on the next candidate and chooses it, as Mozc does.
        press(&mut app, KeyCode::Char(' '));
        let h = app.view.highlighted.expect("the window is open");
        let page = app.view.candidates.clone();
        assert!(page.len() >= 2, "{page:?}");
        assert_eq!(app.view.segments[1], page[h]);
        let pages = app.alternatives.div_ceil(PAGE);
        let reading = app.focused_reading();
        let s = screen(&app, 80, 24);
        assert!(
            s.contains(&format!(" candidates · {reading} · 1/{pages} ")),
            "{s}"
        );
        assert!(s.contains(&format!(">{} {}", h + 1, page[h])), "{s}");
        assert!(s.contains("1-9 pick"), "{s}");
        assert!(modifier_of(&app, &format!(">{} ", h + 1), &page[h]).contains(Modifier::REVERSED));

        // A digit picks from the page and closes the window; the segments stay.
        let pick = if h == 0 { 1 } else { 0 };
        press(&mut app, KeyCode::Char(char::from(b'1' + pick as u8)));
        assert_eq!(app.view.highlighted, None);
        assert!(app.session().converting());
        assert_eq!(app.view.segments[1], page[pick]);
        assert_eq!(
            app.session().input(),
            "きょうはいいてんき",
            "the digit was not typed"
        );
        let chosen = app.view.segments.concat();

        press(&mut app, KeyCode::Enter);
        assert!(!app.session().converting());
        assert_eq!(app.session().committed(), chosen);
        assert!(screen(&app, 80, 24).contains(&format!("│{chosen}")));
    }

    /// F7 writes the input in katakana; Shift+← / Shift+→ resize the focused segment; Esc goes
    /// back to the kana as typed.
    #[test]
    fn function_keys_transliterate_and_shift_arrows_resize() {
        let m = model();
        let mut app = app(&m);
        type_text(&mut app, "tenki");
        press(&mut app, KeyCode::F(7));
        assert_eq!(app.view.segments, ["テンキ"]);
        assert!(screen(&app, 80, 24).contains("→  テンキ"));
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.session().committed(), "テンキ");

        type_text(&mut app, "kyouhaiitenki");
        press(&mut app, KeyCode::Char(' '));
        let before = app.readings();
        let shift = |code| KeyEvent::new(code, KeyModifiers::SHIFT);
        app.handle(shift(KeyCode::Left));
        let after = app.readings();
        assert_eq!(after.concat(), "きょうはいいてんき");
        assert_eq!(
            after[0].chars().count() + 1,
            before[0].chars().count(),
            "{before:?} → {after:?}"
        );
        let s = screen(&app, 80, 24);
        assert!(s.contains(&format!("kana {}", after.join(" "))), "{s}");
        app.handle(shift(KeyCode::Right));
        assert_eq!(app.readings()[0], before[0]);
        press(&mut app, KeyCode::Esc);
        assert!(!app.session().converting());
        assert_eq!(app.session().input(), "きょうはいいてんき");
        assert_eq!(app.session().committed(), "テンキ");
    }

    /// With nothing typed the session passes keys on: Enter starts a new paragraph, the others
    /// say why they did nothing; Ctrl-C quits.
    #[test]
    fn keys_with_nothing_typed_and_quitting() {
        let m = model();
        let mut app = app(&m);
        let s = screen(&app, 90, 24);
        assert!(s.contains("type romaji"), "{s}");
        press(&mut app, KeyCode::Backspace);
        assert!(screen(&app, 80, 20).contains("committed text is final"));
        press(&mut app, KeyCode::Esc);
        assert!(screen(&app, 80, 20).contains("Esc clears the input"));
        press(&mut app, KeyCode::Char(' '));
        assert!(screen(&app, 80, 20).contains("nothing to convert"));
        type_text(&mut app, "ii");
        press(&mut app, KeyCode::Enter);
        let committed = app.session().committed().to_string();
        assert!(!committed.is_empty());
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.session().committed(), format!("{committed}\n"));
        assert_eq!(app.key_ms.len(), 3, "keys passed on are not timed");
        assert!(!app.quit());
        app.handle(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.quit());
    }

    /// A long input with keys that are not romaji draws at every size, down to 1×1, composing,
    /// converting and with the window open; a terminal too small says so.
    #[test]
    fn long_odd_input_draws_at_every_size() {
        let m = model();
        let mut app = app(&m);
        for c in "watashihanihongo@#wo~benkyoushiteimasu"
            .chars()
            .cycle()
            .take(300)
        {
            press(&mut app, KeyCode::Char(c));
        }
        assert!(app.session().kana().chars().count() > 150);
        assert!(app.session().kana().contains('@'));
        let sizes = |app: &TestApp<'_>, title: &str| {
            for (w, h) in [
                (1, 1),
                (20, 5),
                (MIN_WIDTH - 1, MIN_HEIGHT),
                (MIN_WIDTH, MIN_HEIGHT - 1),
            ] {
                let s = screen(app, w, h);
                if w >= 20 {
                    assert!(s.contains("Terminal"), "{s}");
                }
            }
            for (w, h) in [(MIN_WIDTH, MIN_HEIGHT), (80, 24), (200, 60)] {
                let s = screen(app, w, h);
                assert!(s.contains(title) && s.contains('…'), "{s}");
            }
        };
        sizes(&app, "conversions");
        press(&mut app, KeyCode::Char(' '));
        assert!(app.session().converting());
        for _ in 0..app.view.segments.len() {
            press(&mut app, KeyCode::Right);
        }
        sizes(&app, "candidates");
        // The focused (last) segment stays in sight however long the line.
        let last = app.view.segments.last().unwrap().clone();
        let s = screen(&app, MIN_WIDTH, MIN_HEIGHT);
        assert!(s.contains(&last), "{last:?}\n{s}");
        press(&mut app, KeyCode::Char(' '));
        assert!(app.view.highlighted.is_some());
        for _ in 0..12 {
            press(&mut app, KeyCode::Down);
        }
        sizes(&app, "candidates");
        let h = app.view.highlighted.unwrap();
        let s = screen(&app, MIN_WIDTH, MIN_HEIGHT);
        assert!(s.contains(&format!(">{}", h + 1)), "{s}");
    }

    /// One screen as a person sees it, printed for the record (`--nocapture`).
    #[test]
    fn a_frame_of_the_open_window() {
        let m = model();
        let mut app = app(&m);
        type_text(&mut app, "kyouhaiitenki");
        println!("{}", screen(&app, 80, 24));
        press(&mut app, KeyCode::Char(' '));
        println!("{}", screen(&app, 80, 24));
        press(&mut app, KeyCode::Right);
        press(&mut app, KeyCode::Char(' '));
        let s = screen(&app, 80, 24);
        println!("{s}");
        assert!(s.contains(" candidates · いい · 1/"), "{s}");
    }

    #[test]
    fn tails_fit_their_columns() {
        assert_eq!(tail("きょうは", 8), "きょうは");
        assert_eq!(tail("きょうは", 7), "…ょうは");
        assert_eq!(tail("abc", 0), "");
        assert_eq!(tail("今日", 1), "…");
        for cols in 0..12 {
            assert!(text_width(&tail("今日はいい天気ですね", cols)) <= cols);
        }
    }
}
