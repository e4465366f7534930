// Text columns compare byte by byte, as SQLite's do: keyset paging (`id < $after`) and
// ORDER BY on ids and names then give the same order on both engines, whatever
// collation the database was created with.
export const TEXT = 'TEXT COLLATE "C"';
