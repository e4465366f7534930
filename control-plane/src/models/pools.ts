// The regional pools a node, a replica or an instance lives in. Its own module, free of
// the catalog's schema code, because svcctl checks pool names too and should not load it.
export const POOLS = ['na', 'eu', 'apac'] as const;
export type Pool = (typeof POOLS)[number];

export const isPool = (value: string): value is Pool => (POOLS as readonly string[]).includes(value);
