// /ui/editor[/NAME]: the editor over /ui's HTTP API, on the workflow the address names (none: a new one).
import { startEditor } from './editor.js';
import { httpBackend } from './editor-http.js';

startEditor(httpBackend, decodeURIComponent(location.pathname.replace(/^\/ui\/editor\/?/, '').replace(/\/$/, '')));
