import {
  disposeLocation,
  freshLocation,
  type EngineLocation,
  type EngineName,
} from '@flightlog/test-support';
import { openStore, type Store, type StoreOptions } from '../../src/store/open-store.js';

export {
  describeBuses,
  describeEngines,
  describeWithPostgres,
  describeWithRedis,
  disposeLocation,
  freshLocation,
  postgresAvailable,
  postgresUrl,
  redisUrl,
  type BusName,
  type EngineLocation,
  type EngineName,
} from '@flightlog/test-support';

export interface TestStore {
  store: Store;
  location: EngineLocation;
  dispose(): Promise<void>;
}

export async function openTestStore(
  engine: EngineName,
  options: Partial<StoreOptions> = {},
): Promise<TestStore> {
  const location = freshLocation(engine);
  const store = await openStore({ ...location, poolSize: 4, ...options });
  return {
    store,
    location,
    async dispose() {
      await store.close();
      await disposeLocation(location);
    },
  };
}
