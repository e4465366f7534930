// Slots on a public port that anyone may hold for a while before proving who they are (an
// SSH handshake, a Jupyter connection without a valid token yet), shared fairly between
// sites (@svc/shared's clientSite: an address, an IPv6 client's /48). A cap that simply
// refused the next newcomer once full would let one party shut everyone else out by
// holding every slot. So when full, a newcomer takes a slot from the site holding the
// most, as long as that site holds more than the newcomer's own: its oldest is dropped.
// A party holding many slots cannot keep out one holding few, and cannot take one from
// itself. Pure bookkeeping: the caller says when it is full and closes what is dropped.
import { Tally } from './tally.js';

export interface FairSlot {
  readonly site: string;
  /** Gives the slot up for a newcomer: released, and its holder told to close. */
  drop(): void;
  /** The holder is done with it (closed, or proved itself); safe to call twice. */
  release(): void;
}

export class FairShare {
  /** Oldest first (a Set keeps insertion order). */
  private readonly slots = new Set<FairSlot>();
  private readonly bySite = new Tally();

  get size(): number {
    return this.slots.size;
  }

  heldBy(site: string): number {
    return this.bySite.of(site);
  }

  /** A slot for `site`; `dropped` is called (once) if it is given up for a newcomer. */
  add(site: string, dropped: () => void): FairSlot {
    let held = true;
    const slot: FairSlot = {
      site,
      release: () => {
        if (!held) return;
        held = false;
        this.slots.delete(slot);
        this.bySite.remove(site);
      },
      drop: () => {
        if (!held) return;
        slot.release();
        dropped();
      },
    };
    this.slots.add(slot);
    this.bySite.add(site);
    return slot;
  }

  /**
   * The slot to give up for a newcomer from `site`: the oldest of the site holding the
   * most (the oldest slot breaks a tie), if that site holds more than `site` does.
   */
  victimFor(site: string): FairSlot | undefined {
    let victim: FairSlot | undefined;
    let most = this.bySite.of(site);
    for (const slot of this.slots) {
      const held = this.bySite.of(slot.site);
      if (slot.site !== site && held > most) {
        victim = slot;
        most = held;
      }
    }
    return victim;
  }
}
