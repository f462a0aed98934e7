#!/usr/bin/env python3
"""Writes assets/probes/general-knowledge.tsv: the general-knowledge probe set for real
pretrained models (multiple choice, four choices, scored like lm-eval-harness).

Clusters are the things asked about: a country (its capital, the country of its capital, its
continent) or a chemical element (its symbol, the element of its symbol). Distractors are drawn
with a fixed seed from the same kind of answer (capitals of the same continent where there are
enough). Facts are common knowledge; countries whose capital or continent is disputed or
ambiguous (transcontinental states, split capitals) are left out.

    python3 scripts/gen_general_probes.py
"""
import os
import random

# country, capital, continent
COUNTRIES = """
Albania|Tirana|Europe
Andorra|Andorra la Vella|Europe
Austria|Vienna|Europe
Belarus|Minsk|Europe
Belgium|Brussels|Europe
Bosnia and Herzegovina|Sarajevo|Europe
Bulgaria|Sofia|Europe
Croatia|Zagreb|Europe
Czechia|Prague|Europe
Denmark|Copenhagen|Europe
Estonia|Tallinn|Europe
Finland|Helsinki|Europe
France|Paris|Europe
Germany|Berlin|Europe
Greece|Athens|Europe
Hungary|Budapest|Europe
Iceland|Reykjavik|Europe
Ireland|Dublin|Europe
Italy|Rome|Europe
Latvia|Riga|Europe
Liechtenstein|Vaduz|Europe
Lithuania|Vilnius|Europe
Luxembourg|Luxembourg|Europe
Malta|Valletta|Europe
Moldova|Chisinau|Europe
Monaco|Monaco|Europe
Montenegro|Podgorica|Europe
North Macedonia|Skopje|Europe
Norway|Oslo|Europe
Poland|Warsaw|Europe
Portugal|Lisbon|Europe
Romania|Bucharest|Europe
San Marino|San Marino|Europe
Serbia|Belgrade|Europe
Slovakia|Bratislava|Europe
Slovenia|Ljubljana|Europe
Spain|Madrid|Europe
Sweden|Stockholm|Europe
Switzerland|Bern|Europe
Ukraine|Kyiv|Europe
United Kingdom|London|Europe
Afghanistan|Kabul|Asia
Bahrain|Manama|Asia
Bangladesh|Dhaka|Asia
Bhutan|Thimphu|Asia
Brunei|Bandar Seri Begawan|Asia
Cambodia|Phnom Penh|Asia
China|Beijing|Asia
India|New Delhi|Asia
Indonesia|Jakarta|Asia
Iran|Tehran|Asia
Iraq|Baghdad|Asia
Japan|Tokyo|Asia
Jordan|Amman|Asia
Kuwait|Kuwait City|Asia
Kyrgyzstan|Bishkek|Asia
Laos|Vientiane|Asia
Lebanon|Beirut|Asia
Malaysia|Kuala Lumpur|Asia
Maldives|Male|Asia
Mongolia|Ulaanbaatar|Asia
Nepal|Kathmandu|Asia
North Korea|Pyongyang|Asia
Oman|Muscat|Asia
Pakistan|Islamabad|Asia
Philippines|Manila|Asia
Qatar|Doha|Asia
Saudi Arabia|Riyadh|Asia
Singapore|Singapore|Asia
South Korea|Seoul|Asia
Syria|Damascus|Asia
Tajikistan|Dushanbe|Asia
Thailand|Bangkok|Asia
Turkmenistan|Ashgabat|Asia
United Arab Emirates|Abu Dhabi|Asia
Uzbekistan|Tashkent|Asia
Vietnam|Hanoi|Asia
Yemen|Sanaa|Asia
Algeria|Algiers|Africa
Angola|Luanda|Africa
Botswana|Gaborone|Africa
Burkina Faso|Ouagadougou|Africa
Burundi|Gitega|Africa
Cameroon|Yaounde|Africa
Chad|N'Djamena|Africa
Democratic Republic of the Congo|Kinshasa|Africa
Djibouti|Djibouti|Africa
Egypt|Cairo|Africa
Eritrea|Asmara|Africa
Ethiopia|Addis Ababa|Africa
Gabon|Libreville|Africa
Gambia|Banjul|Africa
Ghana|Accra|Africa
Guinea|Conakry|Africa
Kenya|Nairobi|Africa
Lesotho|Maseru|Africa
Liberia|Monrovia|Africa
Libya|Tripoli|Africa
Madagascar|Antananarivo|Africa
Malawi|Lilongwe|Africa
Mali|Bamako|Africa
Mauritania|Nouakchott|Africa
Morocco|Rabat|Africa
Mozambique|Maputo|Africa
Namibia|Windhoek|Africa
Niger|Niamey|Africa
Nigeria|Abuja|Africa
Rwanda|Kigali|Africa
Senegal|Dakar|Africa
Sierra Leone|Freetown|Africa
Somalia|Mogadishu|Africa
South Sudan|Juba|Africa
Sudan|Khartoum|Africa
Togo|Lome|Africa
Tunisia|Tunis|Africa
Uganda|Kampala|Africa
Zambia|Lusaka|Africa
Zimbabwe|Harare|Africa
Bahamas|Nassau|North America
Barbados|Bridgetown|North America
Belize|Belmopan|North America
Canada|Ottawa|North America
Costa Rica|San Jose|North America
Cuba|Havana|North America
Dominican Republic|Santo Domingo|North America
El Salvador|San Salvador|North America
Guatemala|Guatemala City|North America
Haiti|Port-au-Prince|North America
Honduras|Tegucigalpa|North America
Jamaica|Kingston|North America
Mexico|Mexico City|North America
Nicaragua|Managua|North America
Panama|Panama City|North America
United States|Washington, D.C.|North America
Argentina|Buenos Aires|South America
Brazil|Brasilia|South America
Chile|Santiago|South America
Colombia|Bogota|South America
Ecuador|Quito|South America
Guyana|Georgetown|South America
Paraguay|Asuncion|South America
Peru|Lima|South America
Suriname|Paramaribo|South America
Uruguay|Montevideo|South America
Venezuela|Caracas|South America
Australia|Canberra|Oceania
Fiji|Suva|Oceania
New Zealand|Wellington|Oceania
Papua New Guinea|Port Moresby|Oceania
Samoa|Apia|Oceania
Tonga|Nuku'alofa|Oceania
Vanuatu|Port Vila|Oceania
Solomon Islands|Honiara|Oceania
"""

# name, symbol (elements 1-56 and well-known heavier ones)
ELEMENTS = """
Hydrogen|H
Helium|He
Lithium|Li
Beryllium|Be
Boron|B
Carbon|C
Nitrogen|N
Oxygen|O
Fluorine|F
Neon|Ne
Sodium|Na
Magnesium|Mg
Aluminium|Al
Silicon|Si
Phosphorus|P
Sulfur|S
Chlorine|Cl
Argon|Ar
Potassium|K
Calcium|Ca
Scandium|Sc
Titanium|Ti
Vanadium|V
Chromium|Cr
Manganese|Mn
Iron|Fe
Cobalt|Co
Nickel|Ni
Copper|Cu
Zinc|Zn
Gallium|Ga
Germanium|Ge
Arsenic|As
Selenium|Se
Bromine|Br
Krypton|Kr
Rubidium|Rb
Strontium|Sr
Zirconium|Zr
Silver|Ag
Tin|Sn
Antimony|Sb
Iodine|I
Xenon|Xe
Cesium|Cs
Barium|Ba
Tungsten|W
Platinum|Pt
Gold|Au
Mercury|Hg
Lead|Pb
Bismuth|Bi
Radon|Rn
Radium|Ra
Uranium|U
Plutonium|Pu
"""

CONTINENTS = ["Europe", "Asia", "Africa", "North America", "South America", "Oceania"]


def rows(text, n):
    out = [tuple(x.strip() for x in line.split("|")) for line in text.strip().splitlines()]
    assert all(len(r) == n for r in out), [r for r in out if len(r) != n]
    return out


def main():
    rng = random.Random(2026)
    countries = rows(COUNTRIES, 3)
    elements = rows(ELEMENTS, 2)
    assert len({c for c, _, _ in countries}) == len(countries)
    items = []  # (cluster, context, answer, distractors)

    def pick(pool, answer, k=3):
        pool = sorted({p for p in pool if p != answer})
        return rng.sample(pool, k)

    for country, capital, continent in countries:
        cluster = f"country:{country}"
        same = [c for c in countries if c[2] == continent and c[0] != country]
        cap_pool = [c[1] for c in same] if len(same) >= 3 else [c[1] for c in countries]
        items.append((cluster, f"The capital of {country} is", capital, pick(cap_pool, capital)))
        country_pool = [c[0] for c in same] if len(same) >= 3 else [c[0] for c in countries]
        items.append((cluster, f"{capital} is the capital of", country, pick(country_pool, country)))
        items.append((cluster, f"{country} is a country in", continent, pick(CONTINENTS, continent)))
    for name, symbol in elements:
        cluster = f"element:{name}"
        items.append((cluster, f"The chemical symbol for {name.lower()} is", symbol,
                      pick([e[1] for e in elements], symbol)))
        items.append((cluster, f"The chemical element with the symbol {symbol} is", name.lower(),
                      pick([e[0].lower() for e in elements], name.lower())))
    # Atomic numbers of the first 38 (listed in order above), distractors from neighbours.
    for z, (name, _) in enumerate(elements[:38], start=1):
        near = [e[0].lower() for e in elements[max(0, z - 6):z + 5]]
        items.append((f"element:{name}", f"The chemical element with atomic number {z} is",
                      name.lower(), pick(near, name.lower())))
    clusters = {c for c, *_ in items}
    assert len(items) >= 600 and len(clusters) >= 150, (len(items), len(clusters))
    path = os.path.join(os.path.dirname(__file__), "..", "assets", "probes", "general-knowledge.tsv")
    with open(path, "w", encoding="utf-8") as f:
        f.write("# hif8lab general-knowledge probes: cluster, context, answer, three distractors "
                "(tab-separated; each choice is scored as \" \" + choice after the context). "
                "Written by scripts/gen_general_probes.py; chance is 1/4.\n")
        for cluster, context, answer, distractors in items:
            for field in (cluster, context, answer, *distractors):
                assert "\t" not in field and "\n" not in field
            f.write("\t".join([cluster, context, answer, *distractors]) + "\n")
    print(f"wrote {os.path.normpath(path)}: {len(items)} items over {len(clusters)} clusters")


if __name__ == "__main__":
    main()
