-- The document text of a blueprint version as the editor saved it (YAML or JSON), kept byte for byte.
ALTER TABLE blueprints ADD COLUMN text TEXT;
