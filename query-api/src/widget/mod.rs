//! The review widgets' server half: the script `/widget/v1/reviews.js` as
//! served (its source, messages and style from the repository's `widget/`
//! folder, put together once at start), and the first view of
//! `<product-reviews>` rendered here for `/v1/products/{id}/reviews.html`,
//! with the product's schema.org JSON-LD.
//!
//! The first view is the markup `widget/reviews.js` renders for a product's
//! ranked reviews and summary (`widgetHtml` there, [`FirstView`] here), in a
//! declarative shadow root, with the answer it shows embedded: the script
//! adopts it as it is, so nothing moves when it takes over. The two renderers
//! are kept equal by the browser tests (`widget/test/`), which compare them.
//!
//! A rendered first view is kept beside the ranking it shows
//! ([`RenderedViews`]), so a product page served again costs a lookup, not a
//! rendering and a hash. This module does no I/O: [`crate::routes::widget`]
//! reads the ranking.
//!
//! Here the rooms: [`script`] assembles the script, [`messages`] says what
//! the widgets say in each language, [`render`] renders the first view and
//! [`rendered_views`] keeps what was rendered.

mod messages;
mod render;
mod rendered_views;
mod script;

pub use messages::Lang;
pub use render::{shown_stale, FirstView};
pub use rendered_views::{Rendered, RenderedViews, ViewKey};
pub use script::{SCRIPT, SCRIPT_CACHE_CONTROL};
