//! Metadata (JACK's metadata.h): [`MetadataApi`], the queries any
//! connection may make (see [`crate::Requests::metadata`]), and the
//! [`Client`] requests that set and remove properties. Non-real-time
//! threads only.

use crate::client::Client;
use crate::error::{unexpected, Result};
use crate::requests::Requests;
use resound_protocol::wire::{self, Reply, Request};

/// Metadata queries (see [`Requests::metadata`]).
pub struct MetadataApi<'a>(&'a dyn Requests);

impl<'a> MetadataApi<'a> {
    /// Queries made over `conn`.
    pub(crate) fn new(conn: &'a dyn Requests) -> MetadataApi<'a> {
        MetadataApi(conn)
    }
}

impl MetadataApi<'_> {
    /// One property: (value, type).
    pub fn get(&self, subject: u64, key: &str) -> Result<Option<wire::Property>> {
        match self.0.call(Request::GetProperty {
            subject,
            key: key.into(),
        })? {
            Reply::Property(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Every property of a subject.
    pub fn get_all(&self, subject: u64) -> Result<Vec<wire::Property>> {
        match self.0.call(Request::GetProperties { subject })? {
            Reply::Properties(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Every subject with its properties.
    pub fn all(&self) -> Result<Vec<(u64, Vec<wire::Property>)>> {
        match self.0.call(Request::GetAllProperties)? {
            Reply::AllProperties(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }
}

impl Client {
    /// Sets a metadata property of a subject (client or port UUID).
    pub fn set_property(
        &self,
        subject: u64,
        key: &str,
        value: &str,
        type_name: &str,
    ) -> Result<()> {
        self.ok(Request::SetProperty {
            subject,
            key: key.into(),
            value: value.into(),
            type_name: type_name.into(),
        })
    }

    /// Removes one property.
    pub fn remove_property(&self, subject: u64, key: &str) -> Result<()> {
        self.ok(Request::RemoveProperty {
            subject,
            key: key.into(),
        })
    }

    /// Removes every property of a subject; returns how many there were.
    pub fn remove_properties(&self, subject: u64) -> Result<u32> {
        match self.call(Request::RemoveProperties { subject })? {
            Reply::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    /// Removes every property of every subject.
    pub fn remove_all_properties(&self) -> Result<()> {
        self.ok(Request::RemoveAllProperties)
    }
}
