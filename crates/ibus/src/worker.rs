//! The converter thread: it owns the converter and every engine's typing session.
//!
//! A [`Session`] borrows the converter and is not `Send` (its language-model states share
//! `Rc`s), so neither can live in the D-Bus objects, which zbus may poll on any thread. One
//! thread opens the converter, keeps a session per IBus engine, and answers requests that the
//! D-Bus side sends over a channel, each with a oneshot for the reply the method call awaits.

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::mpsc;
use std::thread;

use fastsoftmax_ime::converter::ConverterScorer;
use fastsoftmax_ime::session::PAGE;
use fastsoftmax_ime::{Converter, Key, Session, UserData, View};
use futures_channel::oneshot;

/// What an engine asks of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A new engine: a fresh session (the daemon's `CreateEngine`).
    Open,
    /// One key.
    Press(Key),
    /// A key the session has no binding for: used only while something is typed.
    Other,
    /// Drops the input (focus out, reset, disable); the context committed before stays.
    Clear,
    /// The engine is gone (`Destroy`).
    Close,
    /// Every engine is gone: the daemon that created them went away.
    CloseAll,
}

/// A session's answer: whether the key was used, what it committed and what to draw now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub consumed: bool,
    pub committed: Option<String>,
    pub view: View,
}

struct Request {
    engine: u32,
    action: Action,
    reply: oneshot::Sender<Outcome>,
}

/// The D-Bus side's handle on the converter thread; cheap to clone.
#[derive(Clone)]
pub struct Worker {
    requests: mpsc::Sender<Request>,
}

impl Worker {
    /// Starts the thread and waits until it has opened the converter in `dir`, so that a bad
    /// folder is reported at start rather than as engines that never answer.
    pub fn spawn(dir: &Path) -> Result<Worker, String> {
        let (requests, inbox) = mpsc::channel();
        let (ready, opened) = mpsc::channel();
        let dir = dir.to_path_buf();
        thread::Builder::new()
            .name("converter".into())
            .spawn(move || {
                let converter = match Converter::open(&dir) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready.send(Err(format!("{}: {e}", dir.display())));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                serve(&converter, inbox);
            })
            .map_err(|e| format!("cannot start the converter thread: {e}"))?;
        opened
            .recv()
            .map_err(|_| "the converter thread stopped while opening".to_string())??;
        Ok(Worker { requests })
    }

    /// Asks the session of `engine` to do `action`; `None` when the thread is gone.
    pub async fn ask(&self, engine: u32, action: Action) -> Option<Outcome> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request {
                engine,
                action,
                reply,
            })
            .ok()?;
        answer.await.ok()
    }

    /// Drops every session (the daemon that created them went away); does not wait.
    pub fn close_all(&self) {
        let (reply, _) = oneshot::channel();
        let _ = self.requests.send(Request {
            engine: 0,
            action: Action::CloseAll,
            reply,
        });
    }
}

/// A session of `converter` with the user's dictionary and history from `data`.
fn opened<'c>(
    converter: &'c Converter,
    data: Option<&UserData>,
) -> Result<Session<'c, ConverterScorer<'c>>, String> {
    let mut session = converter.session(PAGE).map_err(|e| e.to_string())?;
    if let Some(data) = data {
        match data.load_into(&mut session) {
            Ok(warnings) => warnings
                .iter()
                .for_each(|w| eprintln!("{}: {w}", crate::me())),
            Err(e) => eprintln!("{}: the user's data is not used: {e}", crate::me()),
        }
    }
    Ok(session)
}

/// Commits between saves of the history (a save writes the whole file, too slow for a key).
const SAVE_EVERY: usize = 20;

/// The thread's loop: until every [`Worker`] is dropped.
fn serve(converter: &Converter, inbox: mpsc::Receiver<Request>) {
    let mut sessions = HashMap::new();
    // The user's dictionary and history, shared with the terminal converter: loaded into each
    // new session, the history saved when a session closes and every `SAVE_EVERY` commits.
    let data = UserData::default_dir()
        .map_err(|e| eprintln!("{}: nothing is learned or saved: {e}", crate::me()))
        .ok();
    let save = |session: &Session<'_, ConverterScorer<'_>>| {
        if let Some(data) = &data {
            if let Err(e) = data.save_history(session.history()) {
                eprintln!("{}: the history is not saved: {e}", crate::me());
            }
        }
    };
    let mut commits = 0usize;
    for Request {
        engine,
        action,
        reply,
    } in inbox
    {
        let outcome = match action {
            Action::Open => match opened(converter, data.as_ref()) {
                Ok(session) => {
                    sessions.insert(engine, session);
                    Outcome::default()
                }
                Err(e) => {
                    eprintln!("{}: cannot start a session: {e}", crate::me());
                    continue; // the dropped reply fails the engine's creation
                }
            },
            Action::Close => {
                if let Some(session) = sessions.remove(&engine) {
                    save(&session);
                }
                Outcome::default()
            }
            Action::CloseAll => {
                sessions.drain().for_each(|(_, session)| save(&session));
                Outcome::default()
            }
            // An engine the daemon addresses after closing it gets an answer that uses
            // nothing.
            _ => match sessions.get_mut(&engine) {
                Some(session) => {
                    match panic::catch_unwind(AssertUnwindSafe(|| act(session, action))) {
                        Ok(outcome) => {
                            if outcome.committed.is_some() {
                                commits += 1;
                                if commits.is_multiple_of(SAVE_EVERY) {
                                    save(session);
                                }
                            }
                            outcome
                        }
                        // A bug in the converter costs that engine its input, not every engine
                        // the process serves: it starts over with a fresh session.
                        Err(_) => {
                            match opened(converter, data.as_ref()) {
                                Ok(fresh) => sessions.insert(engine, fresh),
                                Err(_) => sessions.remove(&engine),
                            };
                            Outcome::default()
                        }
                    }
                }
                None => Outcome::default(),
            },
        };
        let _ = reply.send(outcome);
    }
}

fn act(session: &mut Session<'_, ConverterScorer<'_>>, action: Action) -> Outcome {
    match action {
        // With nothing typed Tab is the application's (moving between fields), not a way to
        // take the next word predicted.
        Action::Press(Key::Tab) if !session.converting() && session.input().is_empty() => Outcome {
            consumed: false,
            committed: None,
            view: session.view(),
        },
        Action::Press(key) => {
            let reply = session.press(key);
            Outcome {
                consumed: reply.consumed,
                committed: reply.committed.filter(|t| !t.is_empty()),
                view: session.view(),
            }
        }
        Action::Other => {
            let view = session.view();
            Outcome {
                consumed: !view.segments.is_empty(),
                committed: None,
                view,
            }
        }
        Action::Clear => {
            session.clear();
            Outcome::default()
        }
        Action::Open | Action::Close | Action::CloseAll => Outcome::default(),
    }
}
