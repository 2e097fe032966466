// Builds the embedded engine's template data directory (store/pglite-template.ts says why),
// after tsc, from the compiled store; skipped when the one on disk is current.
import { loadMigrations } from '../dist/store/migrate.js';
import { PGLITE_EXTENSIONS } from '../dist/store/pglite-client.js';
import { pgliteTemplateIsCurrent, writePgliteTemplate } from '../dist/store/pglite-template.js';

const migrations = (await loadMigrations()).map((migration) => migration.name);
if (!pgliteTemplateIsCurrent(migrations)) await writePgliteTemplate(PGLITE_EXTENSIONS);
