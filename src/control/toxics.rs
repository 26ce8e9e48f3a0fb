//! Toxic operations of the [`Store`]: list, show, add, update, remove, with Toxiproxy's
//! defaults (`<type>_<stream>` names, downstream, toxicity 1) and conflicts.
//!
//! Invariants: toxic names are unique per proxy across both streams and the profile's toxics
//! (see [`super::profile_view`]), which are listed and shown but never changed here (409); a
//! toxic's `type` and `stream` never change after it is added; every accepted change rebuilds the proxy's whole
//! fault chain and hands it to the hub, and a change the hub or the catalogue refuses is undone.

use http::StatusCode;
use serde_json::{Map, Value};

use super::errors::ApiError;
use super::hub::CatalogError;
use super::model::{ToxicDoc, ToxicInput, check_toxicity, merge_attributes, parse_stream};
use super::store::{ProxyEntry, Store, ToxicEntry, ToxicFault, hub_error, toxic_doc};
use crate::vocab::Direction;

impl Store {
    /// `GET /proxies/{name}/toxics`.
    pub async fn toxics(&self, name: &str) -> Result<Vec<ToxicDoc>, ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(name).ok_or_else(ApiError::proxy_not_found)?;
        Ok(p.toxic_docs(self.hub.as_ref(), name))
    }

    /// `GET /proxies/{name}/toxics/{toxic}`.
    pub async fn toxic(&self, name: &str, toxic: &str) -> Result<ToxicDoc, ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(name).ok_or_else(ApiError::proxy_not_found)?;
        p.toxics
            .iter()
            .find(|t| t.name == toxic)
            .map(toxic_doc)
            .or_else(|| p.profile_toxic(self.hub.as_ref(), name, toxic))
            .ok_or_else(ApiError::toxic_not_found)
    }

    /// `POST /proxies/{name}/toxics`.
    pub async fn add_toxic(&self, name: &str, input: ToxicInput) -> Result<ToxicDoc, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let entry = proxies
            .get_mut(name)
            .ok_or_else(ApiError::proxy_not_found)?;
        let stream = parse_stream(input.stream.as_deref())?;
        let type_ = input.type_.unwrap_or_default();
        let toxic_name = match input.name {
            Some(n) if !n.is_empty() => n,
            _ => format!("{type_}_{}", stream.as_str()),
        };
        self.check_type(&type_)?;
        if entry.toxics.iter().any(|t| t.name == toxic_name)
            || entry
                .profile_toxic(self.hub.as_ref(), name, &toxic_name)
                .is_some()
        {
            return Err(ApiError::toxic_exists());
        }
        let toxicity = check_toxicity(input.toxicity.unwrap_or(1.0))?;
        let attributes = merge_attributes(&type_, None, input.attributes.as_ref())?;
        let fault = self.build(&type_, &attributes, stream, toxicity)?;
        let toxic = ToxicEntry {
            name: toxic_name,
            type_,
            stream,
            toxicity,
            attributes,
            fault,
        };
        let doc = toxic_doc(&toxic);
        entry.toxics.push(toxic);
        if let Err(e) = self.apply(name, entry) {
            entry.toxics.pop();
            return Err(e);
        }
        Ok(doc)
    }

    /// `PATCH /proxies/{name}/toxics/{toxic}`: merges attributes, keeps an absent toxicity.
    /// `name`, `type` and `stream` may be sent back unchanged; changing them is refused.
    pub async fn update_toxic(
        &self,
        name: &str,
        toxic: &str,
        input: ToxicInput,
    ) -> Result<ToxicDoc, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let entry = proxies
            .get_mut(name)
            .ok_or_else(ApiError::proxy_not_found)?;
        let idx = self.toxic_index(name, entry, toxic)?;
        let current = &entry.toxics[idx];
        if input.name.as_deref().is_some_and(|n| n != current.name) {
            return Err(ApiError::bad_body(
                "a toxic cannot be renamed; delete it and add a new one",
            ));
        }
        if input.type_.as_deref().is_some_and(|t| t != current.type_) {
            return Err(ApiError::bad_body(format!(
                "the type of toxic '{toxic}' is '{}' and cannot change; delete it and add a new one",
                current.type_
            )));
        }
        if input.stream.is_some() && parse_stream(input.stream.as_deref())? != current.stream {
            return Err(ApiError::bad_body(format!(
                "the stream of toxic '{toxic}' is {} and cannot change; delete it and add a new one",
                current.stream
            )));
        }
        let toxicity = check_toxicity(input.toxicity.unwrap_or(current.toxicity))?;
        let attributes = merge_attributes(
            &current.type_,
            Some(&current.attributes),
            input.attributes.as_ref(),
        )?;
        let fault = self.build(&current.type_, &attributes, current.stream, toxicity)?;
        let updated = ToxicEntry {
            name: current.name.clone(),
            type_: current.type_.clone(),
            stream: current.stream,
            toxicity,
            attributes,
            fault,
        };
        let doc = toxic_doc(&updated);
        let old = std::mem::replace(&mut entry.toxics[idx], updated);
        if let Err(e) = self.apply(name, entry) {
            entry.toxics[idx] = old;
            return Err(e);
        }
        Ok(doc)
    }

    /// `DELETE /proxies/{name}/toxics/{toxic}`.
    pub async fn remove_toxic(&self, name: &str, toxic: &str) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        let entry = proxies
            .get_mut(name)
            .ok_or_else(ApiError::proxy_not_found)?;
        let idx = self.toxic_index(name, entry, toxic)?;
        let old = entry.toxics.remove(idx);
        if let Err(e) = self.apply(name, entry) {
            entry.toxics.insert(idx, old);
            return Err(e);
        }
        Ok(())
    }

    /// Every toxic type the API accepts, sorted.
    pub fn known_types(&self) -> Vec<String> {
        let mut known = self.catalog.known_types();
        known.push("noop".to_owned());
        known.sort();
        known.dedup();
        known
    }

    fn check_type(&self, type_: &str) -> Result<(), ApiError> {
        if self.known_types().iter().any(|k| k == type_) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            CatalogError::UnknownType {
                type_: type_.to_owned(),
                known: self.known_types().join(", "),
            }
            .to_string(),
        ))
    }

    fn build(
        &self,
        type_: &str,
        attributes: &Map<String, Value>,
        stream: Direction,
        toxicity: f64,
    ) -> Result<ToxicFault, ApiError> {
        if type_ == "noop" {
            return Ok(ToxicFault::Nothing);
        }
        let attrs = Value::Object(attributes.clone());
        if let Some(outage) = self.catalog.build_outage(type_, &attrs) {
            if toxicity != 1.0 {
                return Err(ApiError::bad_body(format!(
                    "'{type_}' is proxy-wide: it has no toxicity (send 1 or leave it out)"
                )));
            }
            return match outage {
                Ok(s) => Ok(ToxicFault::Outage(s)),
                Err(e) => Err(ApiError::bad_body(e)),
            };
        }
        match self.catalog.build(type_, &attrs, stream, toxicity) {
            Ok(f) => Ok(ToxicFault::Conn(f)),
            Err(e @ CatalogError::UnknownType { .. }) => {
                Err(ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))
            }
            Err(CatalogError::Invalid(why)) => Err(ApiError::bad_body(why)),
        }
    }

    /// Where API toxic `toxic` of proxy `name` stands; a profile toxic of that name is a 409,
    /// anything else the API's "toxic not found".
    fn toxic_index(&self, name: &str, entry: &ProxyEntry, toxic: &str) -> Result<usize, ApiError> {
        if let Some(i) = entry.toxics.iter().position(|t| t.name == toxic) {
            return Ok(i);
        }
        if entry
            .profile_toxic(self.hub.as_ref(), name, toxic)
            .is_some()
        {
            return Err(ApiError::profile_toxic(toxic));
        }
        Err(ApiError::toxic_not_found())
    }

    fn apply(&self, name: &str, entry: &ProxyEntry) -> Result<(), ApiError> {
        if entry.enabled {
            self.hub
                .set_faults(name, entry.chain())
                .map_err(hub_error)?;
            self.hub
                .set_outages(name, entry.outages())
                .map_err(hub_error)?;
        }
        Ok(())
    }
}
