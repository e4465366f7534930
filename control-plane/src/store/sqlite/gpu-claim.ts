// Claiming one GPU (gpu_claims, whose primary key makes a second claim of a GPU impossible,
// across processes too) where placement found it free. The placement was read before the
// claim's transaction, so the claim checks again what placement relied on: a GPU an XID
// made unhealthy, or a node that went unreachable, was cordoned, drained or forgotten
// meanwhile, takes no new claim (measured: an instance placed on a GPU whose XID 79 was
// recorded between the read and the claim). The caller treats a refusal as a GPU taken
// and places again.
export const CLAIM_GPU = `
  INSERT INTO gpu_claims (gpu_uuid, node_id, owner, claimed_at)
  SELECT @uuid, @node, @owner, @at
  WHERE NOT EXISTS (SELECT 1 FROM node_gpus WHERE uuid = @uuid AND healthy = 0)
    AND NOT EXISTS (SELECT 1 FROM nodes WHERE id = @node AND (status <> 'ready' OR cordoned = 1 OR draining = 1 OR forgotten_at IS NOT NULL))
  ON CONFLICT DO NOTHING`;

export const claimParams = (uuid: string, node: string | null, owner: string, at: number) => ({ uuid, node, owner, at });
