/// What a state written before issue 50 looked like: the output index keyed
/// each file by its absolute path. Each string turns today's index (keyed
/// by root and root-relative path) back into that shape, with the same rows
/// under their absolute paths, and forgets that the migration was applied,
/// so the next open migrates it as it would a state the older tourpack left.
package enum LegacyOutputIndex {
    /// The migration that made the index root-relative (`MigrationName.outputRoots`).
    package static let migration = "output paths under their root"

    /// For `<state>/state.sqlite`: the table as it was after "package signatures".
    package static let sqlite = """
        CREATE TABLE outputFileByAbsolutePath (
            path TEXT PRIMARY KEY NOT NULL,
            inputKey TEXT NOT NULL,
            format TEXT NOT NULL,
            codec TEXT NOT NULL,
            sampleRateHz INTEGER NOT NULL,
            channels INTEGER NOT NULL,
            bitrateKbps INTEGER NOT NULL,
            durationSeconds DOUBLE NOT NULL,
            sizeBytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            createdAt DOUBLE NOT NULL,
            lastUsedAt DOUBLE NOT NULL,
            integratedLUFS DOUBLE,
            truePeakDBTP DOUBLE,
            gainDB DOUBLE,
            limiterReductionDB DOUBLE,
            fileSignature TEXT,
            captionsKey TEXT,
            captionsVTT BLOB,
            captionsSHA256 TEXT,
            captionsCues INTEGER,
            captionsTiming TEXT,
            captionsFileSignature TEXT
        );
        INSERT INTO outputFileByAbsolutePath
            SELECT root || '/' || path, inputKey, format, codec, sampleRateHz, channels, bitrateKbps, durationSeconds, sizeBytes, sha256,
                createdAt, lastUsedAt, integratedLUFS, truePeakDBTP, gainDB, limiterReductionDB, fileSignature,
                captionsKey, captionsVTT, captionsSHA256, captionsCues, captionsTiming, captionsFileSignature
            FROM outputFile;
        DROP TABLE outputFile;
        ALTER TABLE outputFileByAbsolutePath RENAME TO outputFile;
        DELETE FROM grdb_migrations WHERE identifier = '\(migration)';
        """

    /// The migration that made the package.json signatures root-relative (`MigrationName.packageRoots`).
    package static let packageMigration = "package paths under their root"

    /// For `<state>/state.sqlite`: the package.json signatures as they were
    /// before `packageMigration`, keyed by absolute path.
    package static let packageSignaturesSQLite = """
        CREATE TABLE packageFileByAbsolutePath (path TEXT PRIMARY KEY NOT NULL, signature TEXT NOT NULL);
        INSERT INTO packageFileByAbsolutePath SELECT CASE root WHEN '' THEN path ELSE root || '/' || path END, signature FROM packageFile;
        DROP TABLE packageFile;
        ALTER TABLE packageFileByAbsolutePath RENAME TO packageFile;
        DELETE FROM grdb_migrations WHERE identifier = '\(packageMigration)';
        """

    /// For PostgreSQL: the table as it was after its version 7.
    package static let postgres = """
        ALTER TABLE output_file DROP CONSTRAINT output_file_pkey;
        UPDATE output_file SET path = root || '/' || path;
        ALTER TABLE output_file DROP COLUMN root;
        ALTER TABLE output_file ADD PRIMARY KEY (path);
        DELETE FROM schema_migrations WHERE name = '\(migration)';
        """
}
