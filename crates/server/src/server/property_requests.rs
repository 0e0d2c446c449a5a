//! Metadata requests (jack_set_property & co): properties set, read and
//! removed, every change told to every client.
//!
//! Threads: session threads, under the state lock.

use super::dispatch::werr;
use super::{Server, State};
use resound_protocol::wire::{
    property_change, ErrorCode, Notification, Property, Reply, Request, WireError,
};

impl Server {
    /// Handles one metadata request.
    pub(super) fn property_request(st: &mut State, req: Request) -> Result<Reply, WireError> {
        match req {
            Request::SetProperty {
                subject,
                key,
                value,
                type_name,
            } => {
                let property = Property {
                    key: key.clone(),
                    value,
                    type_name,
                };
                let change = st.metadata.set(subject, property)?;
                Self::notify(
                    st,
                    Notification::PropertyChange {
                        subject,
                        key,
                        change,
                    },
                );
                Ok(Reply::Ok)
            }
            Request::GetProperty { subject, key } => {
                Ok(Reply::Property(st.metadata.get(subject, &key)))
            }
            Request::GetProperties { subject } => {
                Ok(Reply::Properties(st.metadata.get_all(subject)))
            }
            Request::GetAllProperties => Ok(Reply::AllProperties(st.metadata.all())),
            Request::RemoveProperty { subject, key } => Self::remove_property(st, subject, key),
            Request::RemoveProperties { subject } => {
                let keys = st.metadata.get_all(subject).len() as u32;
                Self::forget_subject(st, subject);
                Ok(Reply::Count(keys))
            }
            Request::RemoveAllProperties => {
                st.metadata.remove_all();
                Self::property_deleted(st, 0, String::new());
                Ok(Reply::Ok)
            }
            other => Err(werr(
                ErrorCode::Protocol,
                format!("unexpected request {other:?}"),
            )),
        }
    }

    /// Removes one property of `subject`.
    fn remove_property(st: &mut State, subject: u64, key: String) -> Result<Reply, WireError> {
        if !st.metadata.remove(subject, &key) {
            return Err(werr(
                ErrorCode::NotFound,
                format!("subject {subject} has no property {key:?}"),
            ));
        }
        Self::property_deleted(st, subject, key);
        Ok(Reply::Ok)
    }

    /// Removes a subject's properties and tells everyone.
    pub(super) fn forget_subject(st: &mut State, subject: u64) {
        for key in st.metadata.remove_subject(subject) {
            Self::property_deleted(st, subject, key);
        }
    }

    /// Tells everyone a property (all of them: subject 0, empty key) is gone.
    fn property_deleted(st: &mut State, subject: u64, key: String) {
        Self::notify(
            st,
            Notification::PropertyChange {
                subject,
                key,
                change: property_change::DELETED,
            },
        );
    }
}
