-- The cloud-hosted channel types (docs/providers.md): aws_bedrock, gcp_vertex and azure_openai join the
-- first-party ones. The constraint is 0001's inline CHECK, named by Postgres' default.
ALTER TABLE providers DROP CONSTRAINT providers_channel_type_check;
ALTER TABLE providers ADD CONSTRAINT providers_channel_type_check CHECK (channel_type IN
    ('alpha', 'beta', 'gamma', 'custom', 'router', 'aws_bedrock', 'gcp_vertex', 'azure_openai'));
