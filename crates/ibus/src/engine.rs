//! The D-Bus objects ibus-daemon talks to (`src/ibusfactory.c`, `src/ibusengine.c`,
//! `src/ibusservice.c`; the daemon's side in `bus/factoryproxy.c`, `bus/engineproxy.c`).
//!
//! - `/org/freedesktop/IBus/Factory`, `org.freedesktop.IBus.Factory`: `CreateEngine(s) → o`,
//!   one engine (and one typing session) per input context.
//! - `/org/freedesktop/IBus/Engine/N`, `org.freedesktop.IBus.Engine`: keys in, signals out
//!   (`CommitText`, `UpdatePreeditText`, `UpdateLookupTable`, `HideLookupTable`); and
//!   `org.freedesktop.IBus.Service`: `Destroy`.
//!
//! Every method answers whatever it is sent: arguments of the wrong type are refused by zbus
//! before they reach us, and a key or index outside what we know is passed to the application.

use fastsoftmax_ime::session::PAGE;
use fastsoftmax_ime::{Key, View};
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::{fdo, interface, ObjectServer, OwnedObjectPath};

use crate::keys::{self, Event};
use crate::serialized::{preedit, Boxed, LookupTable, Text};
use crate::worker::{Action, Worker};

/// The component's bus name, as the component XML names it.
pub const COMPONENT: &str = "org.freedesktop.IBus.FastSoftmax";
/// The engines the component XML lists: the same converter behind a Japanese and a US layout.
pub const ENGINES: [&str; 2] = ["fastsoftmax", "fastsoftmax-us"];
pub const FACTORY_PATH: &str = "/org/freedesktop/IBus/Factory";

/// `IBusPreeditFocusMode`: on focus out or reset the daemon commits the preedit shown, so text
/// typed is never lost by clicking elsewhere.
const PREEDIT_COMMIT: u32 = 1;
/// `IBusInputPurpose` values of fields an input method must leave alone.
const PURPOSE_PASSWORD: u32 = 8;
const PURPOSE_PIN: u32 = 9;

/// Makes engines.
pub struct Factory {
    worker: Worker,
    created: u32,
}

impl Factory {
    pub fn new(worker: Worker) -> Self {
        Factory { worker, created: 0 }
    }
}

#[interface(name = "org.freedesktop.IBus.Factory")]
impl Factory {
    /// A new engine named `name`, at a path of its own (libibus's numbering).
    async fn create_engine(
        &mut self,
        name: &str,
        #[zbus(object_server)] server: &ObjectServer,
    ) -> fdo::Result<OwnedObjectPath> {
        if !ENGINES.contains(&name) {
            return Err(fdo::Error::Failed(format!(
                "no engine {name:?} here; this component has {ENGINES:?}"
            )));
        }
        self.created = self.created.wrapping_add(1);
        let id = self.created;
        let path = OwnedObjectPath::try_from(format!("/org/freedesktop/IBus/Engine/{id}"))
            .map_err(|e| fdo::Error::Failed(e.to_string()))?;
        self.worker
            .ask(id, Action::Open)
            .await
            .ok_or_else(|| fdo::Error::Failed("the converter could not start a session".into()))?;
        let engine = Engine {
            id,
            worker: self.worker.clone(),
            shown: View::default(),
            content_type: (0, 0),
        };
        let service = Service {
            id,
            worker: self.worker.clone(),
        };
        let registered = match server.at(&path, engine).await {
            Ok(_) => server.at(&path, service).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = registered {
            self.worker.ask(id, Action::Close).await;
            return Err(e.into());
        }
        eprintln!(
            "{}: engine {name} created at {}",
            crate::me(),
            path.as_str()
        );
        Ok(path)
    }
}

/// One input context's engine: a handle on its session and what the client shows now.
pub struct Engine {
    id: u32,
    worker: Worker,
    /// The view last sent, so that a key that changes nothing sends no signal.
    shown: View,
    /// `(purpose, hints)` of the focused field.
    content_type: (u32, u32),
}

impl Engine {
    /// Does `action` and shows its outcome; whether the key was used.
    async fn act(&mut self, emitter: &SignalEmitter<'_>, action: Action) -> bool {
        let Some(outcome) = self.worker.ask(self.id, action).await else {
            return false;
        };
        if let Some(text) = outcome.committed {
            report(Engine::commit_text(emitter, Boxed(Text::plain(text))).await);
        }
        self.show(emitter, outcome.view).await;
        outcome.consumed
    }

    /// Sends what changed between the view shown and `view`.
    async fn show(&mut self, emitter: &SignalEmitter<'_>, view: View) {
        let old = &self.shown;
        if view.segments != old.segments || view.focus != old.focus {
            let (text, cursor) = preedit(&view);
            let visible = !view.segments.is_empty();
            report(
                Engine::update_preedit_text(emitter, Boxed(text), cursor, visible, PREEDIT_COMMIT)
                    .await,
            );
        }
        if (&view.candidates, view.highlighted, view.page_start)
            != (&old.candidates, old.highlighted, old.page_start)
        {
            report(if view.candidates.is_empty() {
                Engine::hide_lookup_table(emitter).await
            } else {
                Engine::update_lookup_table(emitter, Boxed(LookupTable::page(&view)), true).await
            });
        }
        self.shown = view;
    }

    /// Drops the input. The daemon has already committed or cleared the preedit it showed
    /// (focus out, reset), so only the window is closed.
    async fn clear(&mut self, emitter: &SignalEmitter<'_>) {
        if self.worker.ask(self.id, Action::Clear).await.is_some() {
            self.show(emitter, View::default()).await;
        }
    }

    fn protected(&self) -> bool {
        matches!(self.content_type.0, PURPOSE_PASSWORD | PURPOSE_PIN)
    }
}

#[interface(name = "org.freedesktop.IBus.Engine")]
impl Engine {
    /// One key event; `true` when the engine used it (the application must not see it).
    async fn process_key_event(
        &mut self,
        keyval: u32,
        _keycode: u32,
        state: u32,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> bool {
        if self.protected() {
            return false;
        }
        match keys::event(keyval, state) {
            Event::Key(key) => self.act(&emitter, Action::Press(key)).await,
            Event::Other => self.act(&emitter, Action::Other).await,
            Event::Ignored => false,
        }
    }

    async fn focus_out(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.clear(&emitter).await;
    }

    async fn reset(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.clear(&emitter).await;
    }

    async fn disable(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.clear(&emitter).await;
    }

    /// The panel's buttons and wheel on the candidate window.
    async fn page_up(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.act(&emitter, Action::Press(Key::PageUp)).await;
    }

    async fn page_down(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.act(&emitter, Action::Press(Key::PageDown)).await;
    }

    async fn cursor_up(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.act(&emitter, Action::Press(Key::Up)).await;
    }

    async fn cursor_down(&mut self, #[zbus(signal_emitter)] emitter: SignalEmitter<'_>) {
        self.act(&emitter, Action::Press(Key::Down)).await;
    }

    /// A click on candidate `index` of the page shown: what its digit key does.
    async fn candidate_clicked(
        &mut self,
        index: u32,
        _button: u32,
        _state: u32,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) {
        if (index as usize) < PAGE.min(self.shown.candidates.len()) {
            let digit = char::from(b'1' + index as u8);
            self.act(&emitter, Action::Press(Key::Char(digit))).await;
        }
    }

    // Calls the daemon makes of every engine, which this one needs nothing from.
    fn focus_in(&self) {}
    fn enable(&self) {}
    fn set_cursor_location(&self, _x: i32, _y: i32, _w: i32, _h: i32) {}
    fn set_capabilities(&self, _caps: u32) {}
    fn property_activate(&self, _name: &str, _state: u32) {}

    /// `(purpose, hints)` of the focused field (`IBusInputPurpose`, `IBusInputHints`); in a
    /// password or PIN field every key goes to the application.
    #[zbus(property(emits_changed_signal = "false"))]
    fn content_type(&self) -> (u32, u32) {
        self.content_type
    }

    #[zbus(property)]
    fn set_content_type(&mut self, value: (u32, u32)) {
        self.content_type = value;
    }

    /// `CommitText(v:IBusText)`.
    #[zbus(signal)]
    async fn commit_text(emitter: &SignalEmitter<'_>, text: Boxed<Text>) -> zbus::Result<()>;

    /// `UpdatePreeditText(v:IBusText, u cursor_pos, b visible, u mode)`.
    #[zbus(signal)]
    async fn update_preedit_text(
        emitter: &SignalEmitter<'_>,
        text: Boxed<Text>,
        cursor_pos: u32,
        visible: bool,
        mode: u32,
    ) -> zbus::Result<()>;

    /// `UpdateLookupTable(v:IBusLookupTable, b visible)`.
    #[zbus(signal)]
    async fn update_lookup_table(
        emitter: &SignalEmitter<'_>,
        table: Boxed<LookupTable>,
        visible: bool,
    ) -> zbus::Result<()>;

    /// `HideLookupTable()`: not in libibus's introspection, but a signal the daemon handles.
    #[zbus(signal)]
    async fn hide_lookup_table(emitter: &SignalEmitter<'_>) -> zbus::Result<()>;
}

/// `org.freedesktop.IBus.Service` beside each engine: the daemon's way to end it.
pub struct Service {
    id: u32,
    worker: Worker,
}

#[interface(name = "org.freedesktop.IBus.Service")]
impl Service {
    async fn destroy(
        &self,
        #[zbus(header)] header: Header<'_>,
        #[zbus(object_server)] server: &ObjectServer,
    ) {
        self.worker.ask(self.id, Action::Close).await;
        if let Some(path) = header.path() {
            let _ = server.remove::<Engine, _>(path).await;
            let _ = server.remove::<Service, _>(path).await;
            eprintln!("{}: engine at {} destroyed", crate::me(), path.as_str());
        }
    }
}

/// A signal that could not be sent means the daemon is going away; the main loop notices the
/// closed connection, so the failure is only logged.
fn report(sent: zbus::Result<()>) {
    if let Err(e) = sent {
        eprintln!("{}: cannot send a signal to ibus-daemon: {e}", crate::me());
    }
}
